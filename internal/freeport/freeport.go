// Package freeport hands tests loopback ports for the processes they start
// (mf, nats-server, MinIO), which bind them a moment later.
//
// A port found by listening on port 0 and closing comes from the kernel's
// ephemeral range, the same range every outgoing connection takes its
// source port from. On a busy test machine one of those connections can take
// the port before the child binds it, and the child fails with "address
// already in use". So ports come from below the ephemeral range, where only
// listeners live, and each process walks its own stretch of it, so that test
// binaries running side by side do not hand out the same port.
package freeport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// low is the first port handed out; below it live well-known services.
const low = 10000

// slots is how many stretches the range is cut into; a process starts in
// the stretch of its pid.
const slots = 16

var (
	mu   sync.Mutex
	next int // the next port to try; 0 before the first call
	high int // one past the last port handed out
)

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > low+slots*64 {
				return n
			}
		}
	}
	return 32768
}

// Ports returns the first of n consecutive loopback ports that are free now
// and that no earlier call of this process returned.
func Ports(n int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if next == 0 {
		high = ephemeralLow()
		next = low + (os.Getpid()%slots)*((high-low)/slots)
	}
	for tried := 0; tried < high-low; {
		base := next
		if base+n > high {
			base = low
		}
		next = base + n
		tried += n
		if free(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d free consecutive loopback ports between %d and %d", n, low, high)
}

// Port returns one loopback port, as Ports(1).
func Port() (int, error) { return Ports(1) }

// Addr returns 127.0.0.1:port for a port from Port.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p), nil
}

// free tells whether ports base to base+n-1 can be listened on now.
func free(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
