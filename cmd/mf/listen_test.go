package main

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first n Accepts with err.
type failingListener struct {
	net.Listener
	n   atomic.Int32
	err error
}

func (f *failingListener) Accept() (net.Conn, error) {
	if f.n.Add(-1) >= 0 {
		return nil, f.err
	}
	return f.Listener.Accept()
}

// A listener out of file descriptors (or a connection aborted before it
// was accepted) keeps listening; a closed one ends, and any other error
// ends it with that error.
func TestGatedListenerOutlivesTemporaryAcceptErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		keeps bool
	}{
		{"EMFILE", &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{"ECONNABORTED", &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{"EINVAL", &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EINVAL)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fl := &failingListener{Listener: inner, err: tc.err}
			fl.n.Store(3)
			g := &gatedListener{Listener: fl, conns: make(chan net.Conn), opened: make(chan struct{}), done: make(chan struct{})}
			g.open()
			go g.acceptLoop()
			defer g.Close()
			if !tc.keeps {
				select {
				case <-g.done:
				case <-time.After(5 * time.Second):
					t.Fatal("the listener went on after a permanent error")
				}
				if _, err := g.Accept(); !errors.Is(err, syscall.EINVAL) {
					t.Fatalf("Accept after a permanent error: %v, want it", err)
				}
				return
			}
			c, err := net.Dial("tcp", inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got := make(chan net.Conn, 1)
			go func() {
				if sc, err := g.Accept(); err == nil {
					got <- sc
				}
			}()
			select {
			case sc := <-got:
				sc.Close()
			case <-time.After(5 * time.Second):
				t.Fatal("no connection accepted after temporary accept errors")
			}
			g.Close()
			select {
			case <-g.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the listener did not end when closed")
			}
			if _, err := g.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
			}
		})
	}
}
