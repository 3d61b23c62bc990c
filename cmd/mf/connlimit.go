package main

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The connection cap of a listener (--http-max-conns). Idle connections
// cost a file descriptor each, and a process out of descriptors cannot
// write to its log either: a flood of connections that never send a
// request must not take more than the cap. At the cap a new connection
// takes the place of the one that has waited longest without a request
// under way (one that never sent a byte in its first unusedGrace, or one
// kept alive between requests); when there is none, the new one is
// answered 503 (Retry-After: 1) and closed. docs/deploy.md, "Listener limits".

// shedCounts count the connections a listener shed at its cap.
type shedCounts struct {
	evicted atomic.Int64 // idle connections closed to make room
	refused atomic.Int64 // new connections answered 503
}

// unusedGrace is how long a new connection may stay silent before it
// may be closed to make room: a client sends its request as soon as it
// has connected, but the server reads it only when a goroutine of its own
// runs, later on a busy machine.
const unusedGrace = 500 * time.Millisecond

// maxRefusing bounds the refusals answered at once; beyond it a new
// connection is closed without an answer.
const maxRefusing = 256

// admit reports whether a new connection may be served, closing the
// longest-idle connection first when the listener is at its cap.
func (g *gatedListener) admit() bool {
	if g.maxConns <= 0 {
		return true
	}
	g.mu.Lock()
	if len(g.served) < g.maxConns {
		g.mu.Unlock()
		return true
	}
	var victim *servedConn
	var oldest int64
	fresh := time.Now().Add(-unusedGrace).UnixNano()
	for c := range g.served {
		var since int64
		switch {
		case !c.used.Load():
			if since = c.accepted.UnixNano(); since > fresh {
				since = 0 // its request may be on its way
			}
		default:
			since = c.idleSince.Load()
		}
		if since != 0 && (victim == nil || since < oldest) {
			victim, oldest = c, since
		}
	}
	g.mu.Unlock()
	if victim == nil {
		return false
	}
	_ = victim.Close()
	g.shed.evicted.Add(1)
	return true
}

// refuse answers a connection over the cap with 503 and closes it, in a
// goroutine of its own bounded by maxRefusing.
func (g *gatedListener) refuse(c net.Conn) {
	g.shed.refused.Add(1)
	select {
	case g.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-g.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(250 * time.Millisecond))
		body := `{"status":"unavailable","failing":["listener"],"checks":{"listener":"at its connection cap"},` +
			`"message":"mf: the ` + g.name + ` listener serves ` + itoa(g.maxConns) + ` connections already; retry"}`
		resp := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
			"Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body
		if _, err := c.Write([]byte(resp)); err != nil {
			return
		}
		// Half-close and read what the client sent, so that closing does
		// not reset the connection before the client reads the answer.
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	}()
}

// connState follows the web server's view of each connection: a
// connection waiting for its next request may be closed at the cap.
func connState(c net.Conn, st fasthttp.ConnState) {
	sc, ok := c.(*servedConn)
	if !ok {
		return
	}
	switch st {
	case fasthttp.StateIdle:
		sc.idleSince.Store(time.Now().UnixNano())
	case fasthttp.StateActive:
		sc.idleSince.Store(0)
	}
}

// apply applies the listener limits to a listener's web server (the
// listener itself got its cap from newGatedListener).
func (l listenerLimits) apply(srv *fasthttp.Server) {
	srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = l.read, l.write, l.idle
	// The listener admits at most maxConns; the server's own cap (a 503
	// of its own) leaves room for connections closing meanwhile.
	srv.Concurrency = l.maxConns + maxRefusing
	srv.ConnState = connState
}

// openConns is how many connections the listener serves now.
func (g *gatedListener) openConns() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.served)
}
