package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// gatedListener accepts connections from the moment mf starts, so that
// /healthz can answer 503 while the process is still starting (contract
// section 1). Until open is called, each connection gets one 503 answer
// and is closed; afterwards connections go to the real server through
// Accept.
type gatedListener struct {
	net.Listener
	conns  chan net.Conn
	opened chan struct{}
	once   sync.Once
	done   chan struct{}
	err    error

	// The connections handed to the server, for closeUnused and the
	// connection cap.
	mu     sync.Mutex
	served map[*servedConn]struct{}

	// name is the listener's name in answers and metrics (ingest, api,
	// admin); maxConns caps the connections served at once (0: no cap,
	// see admit); shed counts the connections closed or refused at the cap.
	name     string
	maxConns int
	shed     shedCounts
	refusing chan struct{} // bounds the goroutines that answer refusals
}

// servedConn is a connection handed to the server; it notes whether a
// byte of a request ever arrived on it.
type servedConn struct {
	net.Conn
	g        *gatedListener
	accepted time.Time
	used     atomic.Bool
	// idleSince is when the web server last began to wait for the next
	// request on the connection (unix ns), 0 while a request is under
	// way (connState).
	idleSince atomic.Int64
	closeOnce sync.Once
}

func (c *servedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.used.Store(true)
	}
	return n, err
}

func (c *servedConn) Close() error {
	c.g.mu.Lock()
	delete(c.g.served, c)
	c.g.mu.Unlock()
	var err error
	c.closeOnce.Do(func() { err = c.Conn.Close() })
	return err
}

// closeUnused closes the served connections on which no byte arrived
// within quiet of their accept: a client opened them (HTTP clients dial
// ahead and keep spare connections) but sent no request. While the
// server drains, it waits for every connection that is not between
// requests, and one that never had a request is not: it would hold the
// drain until the read timeout (longer than the drain's own limit). It
// returns how many it closed.
func (g *gatedListener) closeUnused(quiet time.Duration) int {
	g.mu.Lock()
	var idle []*servedConn
	for c := range g.served {
		if !c.used.Load() && time.Since(c.accepted) >= quiet {
			idle = append(idle, c)
		}
	}
	g.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
	return len(idle)
}

// serve wraps a connection handed to the server.
func (g *gatedListener) serve(c net.Conn) *servedConn {
	sc := &servedConn{Conn: c, g: g, accepted: time.Now()}
	g.mu.Lock()
	if g.served == nil {
		g.served = map[*servedConn]struct{}{}
	}
	g.served[sc] = struct{}{}
	g.mu.Unlock()
	return sc
}

func newGatedListener(name, addr string, maxConns int) (*gatedListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	g := &gatedListener{Listener: ln, conns: make(chan net.Conn), opened: make(chan struct{}), done: make(chan struct{}),
		name: name, maxConns: maxConns, refusing: make(chan struct{}, maxRefusing)}
	go g.acceptLoop()
	return g, nil
}

func (g *gatedListener) acceptLoop() {
	defer close(g.done)
	var backoff time.Duration
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && temporaryAcceptError(err) {
				// Out of file descriptors or buffers, or a connection
				// aborted before it was accepted: wait and go on, as
				// net/http does, instead of ending the listener.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			g.err = err
			return
		}
		backoff = 0
		select {
		case <-g.opened:
			if !g.admit() {
				g.refuse(c)
				continue
			}
			sc := g.serve(c)
			select {
			case g.conns <- sc:
			case <-time.After(10 * time.Second):
				sc.Close()
			}
		default:
			go answerStarting(c)
		}
	}
}

// temporaryAcceptError reports whether an Accept error passes: a
// timeout, or a lack of resources that closing connections frees.
func temporaryAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// open hands later connections to the real server.
func (g *gatedListener) open() { g.once.Do(func() { close(g.opened) }) }

// Accept returns the next connection once the gate is open.
func (g *gatedListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.conns:
		return c, nil
	case <-g.done:
		if g.err == nil {
			return nil, net.ErrClosed
		}
		return nil, g.err
	}
}

// answerStarting answers one request with 503 and closes the connection.
func answerStarting(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	body := `{"message":"mf is starting"}`
	if req.URL.Path == "/healthz" {
		body = `{"status":"starting"}`
	}
	resp := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body
	_, _ = c.Write([]byte(resp))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
