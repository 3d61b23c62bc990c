//go:build unix

package ingest

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the test process has
// used. Benchmarks report it per operation beside wall time, because wall
// time on a shared 2-core machine measures the neighbours as much as the
// code.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
