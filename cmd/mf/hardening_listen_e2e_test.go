package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestListenersOutliveFloodsAndSlowClients floods every listener of
// mf serve with idle connections, several times its connection cap, and
// holds the API listener with slow clients: mf keeps answering ordinary
// requests on every listener (it sheds the idle connections), says so on
// /healthz while slow clients leave it no room (503 naming the
// listener), cuts the slow clients at the read timeout and the idle
// kept-alive connections at the idle timeout, and never exits. The
// batches accepted meanwhile are counted exactly.
func TestListenersOutliveFloodsAndSlowClients(t *testing.T) {
	const maxConns, flood = 16, 120
	readTimeout, idleTimeout := 5*time.Second, 2*time.Second
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile,
		"--http-max-conns", fmt.Sprint(maxConns), "--http-read-timeout", readTimeout.String(),
		"--http-idle-timeout", idleTimeout.String(), "--http-write-timeout", "5s")
	addrs := map[string]string{"ingest": p.ingestAddr, "api": p.apiAddr, "admin": p.admn}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	// A client of a listener at its cap gets 503 with Retry-After: 1
	// while the flood is younger than the grace mf gives a new
	// connection (its request may be on its way); clients retry it.
	isCapRefusal := func(code int, b string) bool {
		return code == 503 && strings.Contains(b, `"failing":["listener"]`)
	}
	// A refusal beyond the ones mf answers at once is a closed
	// connection (code 0 here), retried the same way.
	try := func(url string, h ...string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := fresh.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(url string, h ...string) (code int, b string) {
		for deadline := time.Now().Add(5 * time.Second); ; {
			if code, b = try(url, h...); code != 0 && !isCapRefusal(code, b) || time.Now().After(deadline) {
				return code, b
			}
			time.Sleep(100 * time.Millisecond) // Retry-After, shortened
		}
	}
	batches := 0
	send := func() {
		t.Helper()
		id := fmt.Sprintf("f1f1f1f1-0000-4000-8000-%012d", batches)
		body := batchBody(id, "full", fmt.Sprintf(`{"name":"$pageview","anonymousId":"flood-%d","page":{"url":"https://shop.example/"}}`, batches))
		var code int
		var b []byte
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; {
			code, _, b, err = tryDo("POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
				"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
			if err == nil && !isCapRefusal(code, string(b)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // Retry-After, shortened
		}
		if err != nil || code != 202 {
			t.Fatalf("a batch during the flood: %d %s %v", code, b, err)
		}
		batches++
	}
	alive := func() {
		t.Helper()
		select {
		case <-p.done:
			t.Fatalf("mf exited (%v); output:\n%s", p.exitErr, tail(p.out.String(), 6000))
		default:
		}
	}

	// The flood: idle connections that never send a byte.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, addr := range addrs {
		for range flood {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial %s: %v", addr, err)
			}
			conns = append(conns, c)
		}
	}
	for range 5 {
		send()
		if code, b := get(p.api+"/api/v1/projects/"+demoProject+"/overview?period=24h", "Authorization", "Bearer "+demoPAT); code != 200 {
			t.Fatalf("the reporting API during the flood: %d %s", code, b)
		}
		for name, addr := range addrs {
			if code, b := get("http://" + addr + "/healthz"); code != 200 {
				t.Fatalf("%s /healthz during the flood: %d %s", name, code, b)
			}
		}
	}
	fams := scrape(t, p)
	for name := range addrs {
		shed := sample(t, fams, "mf_http_connections_shed_total", "listener", name, "reason", "idle_closed") +
			sample(t, fams, "mf_http_connections_shed_total", "listener", name, "reason", "refused")
		if shed < flood-maxConns {
			t.Errorf("%s: %v connections of the flood shed, want at least %d of the %d", name, shed, flood-maxConns, flood)
		}
		if got := sample(t, fams, "mf_http_connections", "listener", name); got > maxConns {
			t.Errorf("%s serves %v connections, over its cap of %d", name, got, maxConns)
		}
	}
	alive()

	// A kept-alive connection is closed after the idle timeout.
	c, err := net.Dial("tcp", p.ingestAddr)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, c)
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: mf\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a kept-alive /healthz: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	answered := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(idleTimeout + 10*time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("an idle kept-alive connection: %v, want it closed by mf (EOF)", err)
	}
	if idle := time.Since(answered); idle < idleTimeout-100*time.Millisecond {
		t.Errorf("an idle kept-alive connection closed after %v, before the idle timeout of %v", idle, idleTimeout)
	}

	// Slow clients fill the API listener: each sends a byte of its
	// headers now and then, never the end of them.
	slowStart := time.Now()
	slowDone := make(chan time.Duration, maxConns)
	for i := range maxConns {
		c, err := net.Dial("tcp", p.apiAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: mf\r\nX-Slow: ")); err != nil {
			t.Fatal(err)
		}
		go func(c net.Conn, i int) {
			for {
				if _, err := c.Write([]byte("a")); err != nil {
					break
				}
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				var b [256]byte
				if _, err := c.Read(b[:]); err != nil && !isTimeout(err) {
					break // answered (408) or closed by mf
				}
			}
			slowDone <- time.Since(slowStart)
		}(c, i)
	}
	// Once they hold every place, a new connection (even /healthz) is
	// answered 503 naming the listener.
	var refused string
	waitFor(t, readTimeout, func() bool {
		code, b := try(p.api + "/healthz")
		if isCapRefusal(code, b) {
			refused = b
			return true
		}
		return false
	})
	t.Logf("the full API listener answers: %s", refused)
	// The slow clients are cut at the read timeout, and the listener
	// takes work again.
	for range maxConns {
		select {
		case d := <-slowDone:
			if d > readTimeout+10*time.Second {
				t.Errorf("a slow client held its connection for %v, read timeout %v", d, readTimeout)
			}
		case <-time.After(readTimeout + 20*time.Second):
			t.Fatalf("slow clients still connected after %v (read timeout %v)", time.Since(slowStart), readTimeout)
		}
	}
	waitFor(t, 10*time.Second, func() bool { code, _ := get(p.api + "/healthz"); return code == 200 })
	if got := sample(t, scrape(t, p), "mf_http_connections_shed_total", "listener", "api", "reason", "refused"); got < 1 {
		t.Errorf("no refused connection counted on the API listener")
	}
	send()
	alive()

	// Every batch accepted during the flood is counted once.
	waitForEvery(t, 30*time.Second, 500*time.Millisecond, func() bool {
		return overviewNumbers(t, p.api)["people"] == float64(batches)
	})
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM after the flood", c)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
