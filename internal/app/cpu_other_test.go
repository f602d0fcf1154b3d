//go:build !unix

package app_test

import (
	"testing"
	"time"
)

// processCPU is not measured here: cpu-ns/op reads 0.
func processCPU(*testing.B) time.Duration { return 0 }
