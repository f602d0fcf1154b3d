package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/stockguard/shop/internal/config"
)

// profileEnv names the file into which `shop serve` and `shop echo` write
// their CPU profile, from start until they shut down; a %p in it is their
// process id, so that the shops a bench starts, which inherit its
// environment, write a file each.
const profileEnv = "SHOP_CPU_PROFILE"

// profile starts the CPU profile that SHOP_CPU_PROFILE asks for; stop
// ends it and closes the file. Without the variable it does nothing.
func profile(getenv config.Getenv) (stop func(), err error) {
	name := getenv(profileEnv)
	if name == "" {
		return func() {}, nil
	}
	name = strings.ReplaceAll(name, "%p", strconv.Itoa(os.Getpid()))
	stop, err = startCPUProfile(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	return stop, nil
}
