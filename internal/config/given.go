package config

import (
	"cmp"
	"flag"
	"os"
	"regexp"
)

// lookup reads the variable env. An empty value counts as unset, except
// for SHOP_DEBUG_ADDR, whose empty value turns the debug listener off:
// getenv cannot tell empty from unset, so the process's environment says
// whether it is set.
func lookup(getenv Getenv, env string) (string, bool) {
	if v := getenv(env); v != "" {
		return v, true
	}
	if env != "SHOP_DEBUG_ADDR" {
		return "", false
	}
	return os.LookupEnv(env)
}

var envName = regexp.MustCompile(`\bSHOP_[A-Z0-9_]+\b`)

// AsGiven rewrites the SHOP_* variables that err names into their flags,
// --strategy for SHOP_STRATEGY, where the flag was given on fs: an error
// names a setting as the user gave it.
func AsGiven(fs *flag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		for _, s := range settings {
			if s.flag == f.Name {
				given[s.env] = "--" + f.Name
			}
		}
	})
	if len(given) == 0 {
		return err
	}
	return asGivenError{err, envName.ReplaceAllStringFunc(err.Error(), func(env string) string { return cmp.Or(given[env], env) })}
}

// asGivenError is an error whose text names the settings as given, and
// which still wraps the original.
type asGivenError struct {
	err error
	msg string
}

func (e asGivenError) Error() string { return e.msg }
func (e asGivenError) Unwrap() error { return e.err }
