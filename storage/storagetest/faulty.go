package storagetest

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FaultyStore is a fault injector: a loopback proxy to a real
// S3-compatible store (a StartMinIO server) that can
//
//   - be full (SetFull): it refuses every write as MinIO does when its
//     drives are full (507 Insufficient Storage, code XMinioStorageFull),
//     while reads, lists and deletes pass;
//   - be down (Down, Up): its port refuses connections and those open are
//     cut, as when the server dies, until Up listens on the same port
//     again.
//
// Requests keep their signatures: the proxy forwards them unchanged, Host
// header included.
type FaultyStore struct {
	// URL is the store URL given to FaultyStoreProxy with the proxy as
	// its host: hand it to mf as --store.
	URL string
	// Refused counts the writes refused as full so far.
	Refused atomic.Int64

	full    atomic.Bool
	addr    string
	handler http.Handler
	t       testing.TB

	mu  sync.Mutex
	srv *http.Server // nil while down
}

// storageFullBody is MinIO's answer to a write on full drives.
const storageFullBody = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
	`<Error><Code>XMinioStorageFull</Code><Message>Storage backend has reached its minimum free drive threshold. Please delete a few objects to proceed.</Message></Error>`

// FaultyStoreProxy starts a FaultyStore in front of storeURL (a StartMinIO
// URL), up and with room; it stops when t ends.
func FaultyStoreProxy(t testing.TB, storeURL string) *FaultyStore {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "s3" {
		t.Fatalf("FaultyStoreProxy: %q is not an s3:// URL", redact(storeURL))
	}
	secure, _ := strconv.ParseBool(u.Query().Get("secure"))
	scheme := "http"
	if secure {
		scheme = "https"
	}
	target := &url.URL{Scheme: scheme, Host: u.Host}
	f := &FaultyStore{t: t}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // signed by the client
	}}
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := r.Method == http.MethodPut || r.Method == http.MethodPost && !r.URL.Query().Has("delete")
		if write && f.full.Load() {
			f.Refused.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusInsufficientStorage)
			_, _ = w.Write([]byte(storageFullBody))
			return
		}
		proxy.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(f.Down)
	out := *u
	out.Host = f.addr
	f.URL = out.String()
	return f
}

func (f *FaultyStore) serve(ln net.Listener) {
	srv := &http.Server{Handler: f.handler, ReadHeaderTimeout: 10 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// SetFull makes the store refuse writes (true) or take them again.
func (f *FaultyStore) SetFull(full bool) { f.full.Store(full) }

// Down closes the proxy's port and cuts every connection open through it.
func (f *FaultyStore) Down() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens on the proxy's port again, retrying for a while should the
// port be briefly held.
func (f *FaultyStore) Up() {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", f.addr)
		if err == nil {
			f.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("FaultyStore: cannot listen on %s again: %v", f.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
