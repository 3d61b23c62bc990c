package storagetest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ConditionalHeaderDropper is a fault injector: an S3-compatible store
// that silently ignores conditional writes, made of a real one. It
// creates the bucket of storeURL (a StartMinIO URL) on the real server,
// opens it to anonymous requests by a bucket policy, and starts on
// loopback an HTTP proxy to the server that forwards every request
// without its If-Match and If-None-Match headers, and without its
// signature (which covers those headers; the bucket takes anonymous
// requests). It returns storeURL with the proxy as its host; the proxy
// stops when t ends.
func ConditionalHeaderDropper(t testing.TB, storeURL string) string {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil || u.User == nil {
		t.Fatalf("ConditionalHeaderDropper: %q is not an s3://ACCESS:SECRET@host:port/bucket URL", redact(storeURL))
	}
	secret, _ := u.User.Password()
	secure, _ := strconv.ParseBool(u.Query().Get("secure"))
	bucket := strings.TrimPrefix(u.Path, "/")
	client, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(u.User.Username(), secret, ""), Secure: secure})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("ConditionalHeaderDropper: cannot create bucket %s: %v", bucket, err)
	}
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[`+
		`{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetBucketLocation","s3:ListBucket"],"Resource":["arn:aws:s3:::%[1]s"]},`+
		`{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],"Resource":["arn:aws:s3:::%[1]s/*"]}]}`, bucket)
	if err := client.SetBucketPolicy(ctx, bucket, policy); err != nil {
		t.Fatalf("ConditionalHeaderDropper: cannot open bucket %s to anonymous requests: %v", bucket, err)
	}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	target := &url.URL{Scheme: scheme, Host: u.Host}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = target.Host
		for name := range r.Out.Header {
			if strings.HasPrefix(strings.ToLower(name), "x-amz-") {
				r.Out.Header.Del(name)
			}
		}
		for _, h := range []string{"Authorization", "If-Match", "If-None-Match"} {
			r.Out.Header.Del(h)
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	out := *u
	out.Host = ln.Addr().String()
	return out.String()
}
