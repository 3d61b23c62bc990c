package storagetest

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// FullStore is a fault injector: a loopback proxy to a real S3-compatible
// store that, while full, refuses every write as MinIO does when its drives
// are full (507 Insufficient Storage, code XMinioStorageFull). Reads,
// lists and deletes pass, full or not. Requests keep their signatures: the
// proxy forwards them unchanged, Host header included.
type FullStore struct {
	// URL is the store URL given to FullStoreProxy with the proxy as its
	// host: hand it to mf as --store.
	URL  string
	full atomic.Bool
	// Refused counts the writes refused so far.
	Refused atomic.Int64
}

// SetFull makes the store refuse writes (true) or take them again.
func (f *FullStore) SetFull(full bool) { f.full.Store(full) }

// storageFullBody is MinIO's answer to a write on full drives.
const storageFullBody = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
	`<Error><Code>XMinioStorageFull</Code><Message>Storage backend has reached its minimum free drive threshold. Please delete a few objects to proceed.</Message></Error>`

// FullStoreProxy starts a FullStore in front of storeURL (a StartMinIO
// URL); it starts with room and stops when t ends.
func FullStoreProxy(t testing.TB, storeURL string) *FullStore {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "s3" {
		t.Fatalf("FullStoreProxy: %q is not an s3:// URL", redact(storeURL))
	}
	secure, _ := strconv.ParseBool(u.Query().Get("secure"))
	scheme := "http"
	if secure {
		scheme = "https"
	}
	target := &url.URL{Scheme: scheme, Host: u.Host}
	f := &FullStore{}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // signed by the client
	}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	out := *u
	out.Host = ln.Addr().String()
	f.URL = out.String()
	return f
}
