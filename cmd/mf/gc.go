package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcPercent is mf's default GOGC: the processor keeps a large, long-lived
// heap (the facts of the late window), which the default of 100 scans
// over and over. Once commits allocated less (issue 5, round 5), a higher
// GOGC stopped paying: the heap of a backlog grows to GOGC/100+1 times
// the live state, every page of it a page fault for the kernel to serve,
// and in a fresh process 200 took less CPU per event than 400 and 800 and
// a third less memory than 400 (docs/processor.md, "Performance"). The
// soft memory limit keeps GOGC from overshooting the memory the process
// may use.
const gcPercent = 200

// tuneGC sets GOGC to gcPercent and a soft memory limit of three quarters
// of the memory available (the cgroup's limit, else the machine's), unless
// GOGC or GOMEMLIMIT are set in the environment.
func tuneGC(logger *slog.Logger) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	avail := cgroupMemoryLimit()
	if m := machineMemory(); avail == 0 || (m > 0 && m < avail) {
		avail = m
	}
	if avail > 0 {
		debug.SetMemoryLimit(avail / 4 * 3)
		logger.Debug("garbage collector tuned", "gogc", gcPercent, "memory_limit_bytes", avail/4*3)
	}
}

// cgroupMemoryLimit reads a cgroup v2 memory limit; 0 when there is none.
func cgroupMemoryLimit() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil { // "max"
		return 0
	}
	return n
}

// machineMemory reads MemTotal from /proc/meminfo; 0 where there is none.
func machineMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10
				}
			}
		}
	}
	return 0
}
