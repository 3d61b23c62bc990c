package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
)

// printMemory prints the process's peak RSS and the Go heap after the API
// timing. With a reused dataset the process did nothing but serve the
// API, so the peak is the API's (issue 22's "the API's peak RSS"); after
// a build it includes the processor's. After settle, the peak counts from
// the end of the settling (resetPeakRSS).
func printMemory(out io.Writer, reused, settled bool) {
	peak := "unknown"
	if kb, ok := peakRSS(); ok {
		peak = fmt.Sprintf("%.0f MB", float64(kb)/1024)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	what := "the API's own (the dataset was reused)"
	switch {
	case settled:
		what = "the API's own (counted from the end of the settling)"
	case !reused:
		what = "including the build's processor"
	}
	fmt.Fprintf(out, "  memory: peak RSS %s, %s; Go heap in use %.0f MB, heap released to the OS %.0f MB\n",
		peak, what, float64(ms.HeapInuse)/(1<<20), float64(ms.HeapReleased)/(1<<20))
}

// peakRSS is the process's peak resident set size in KiB: Linux's VmHWM
// (which resetPeakRSS resets), else getrusage's maximum.
func peakRSS() (int64, bool) {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmHWM:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb, true
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		return ru.Maxrss, true // Linux: KiB
	}
	return 0, false
}

// writeHeapProfile writes a heap profile (after a GC, so it shows what is
// live) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot write the heap profile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("cannot write the heap profile: %w", err)
	}
	return nil
}

// liveHeap is the bytes of live and not yet swept heap objects now.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// memoryNow describes the process's memory now: its RSS (Linux
// /proc/self/status) and heap objects.
func memoryNow() string {
	rss := "RSS unknown"
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if f := bytes.Fields(sc.Bytes()); len(f) >= 2 && string(f[0]) == "VmRSS:" {
				if kb, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
					rss = fmt.Sprintf("RSS %.0f MB", float64(kb)/1024)
				}
			}
		}
	}
	return fmt.Sprintf("%s, heap objects %.0f MB", rss, float64(liveHeap())/(1<<20))
}
