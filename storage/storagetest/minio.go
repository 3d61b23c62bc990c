package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/mfhq/mf/internal/freeport"
)

// The MinIO server the tests run, pinned. .ci/minio.sh installs it.
const (
	MinIOModule  = "github.com/minio/minio"
	MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"
	// MinIOInstall is the command that installs the pinned MinIO.
	MinIOInstall = "go install " + MinIOModule + "@" + MinIOVersion
)

// How long StartMinIO waits: generous, for a loaded 2-core machine.
const (
	minioReadyTimeout = 90 * time.Second
	minioStopTimeout  = 15 * time.Second
	minioStartTries   = 3
)

// StartMinIO returns the URL (s3://ACCESS:SECRET@127.0.0.1:PORT/BUCKET?secure=false)
// of a fresh, not yet created bucket on a real MinIO server for the test.
//
// With MF_TEST_S3 set to such a URL, the bucket is on that external server
// instead, and it is emptied and removed when t ends. Otherwise StartMinIO
// starts the MinIO binary found at $MINIO_BIN, $(go env GOBIN)/minio,
// $(go env GOPATH)/bin/minio or on PATH, on 127.0.0.1 at a free port with
// its data in a temporary directory, and stops it when t ends. Each call
// starts one server (about a second); for more buckets on the same server
// use FreshBucket. Without a binary the test fails with the command that
// installs it.
func StartMinIO(t testing.TB) string {
	t.Helper()
	if external := os.Getenv("MF_TEST_S3"); external != "" {
		return FreshBucket(t, external)
	}
	bin := findMinIO(t)
	user, password := "mftest", randomHex(t, 16)
	var lastErr error
	for range minioStartTries {
		endpoint, err := startMinIO(t, bin, user, password)
		if err == nil {
			u := url.URL{Scheme: "s3", User: url.UserPassword(user, password), Host: endpoint, RawQuery: "secure=false"}
			return FreshBucket(t, u.String())
		}
		lastErr = err // most likely the port was taken in between; try another
	}
	t.Fatalf("cannot start MinIO (%s): %v", bin, lastErr)
	return ""
}

// FreshBucket returns storeURL with its bucket replaced by a new, unused
// name. The bucket does not exist yet (storage.Open creates it); when t
// ends it is emptied and removed, if the server still runs.
func FreshBucket(t testing.TB, storeURL string) string {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "s3" || u.User == nil {
		t.Fatalf("FreshBucket: %q is not an s3://ACCESS:SECRET@host:port/bucket URL", redact(storeURL))
	}
	u.Path = "/mf-test-" + randomHex(t, 8)
	bucket := strings.TrimPrefix(u.Path, "/")
	t.Cleanup(func() { removeBucket(t, u, bucket) })
	return u.String()
}

// removeBucket empties and removes bucket, logging (not failing) when it
// cannot: the server may be stopped already.
func removeBucket(t testing.TB, u *url.URL, bucket string) {
	secret, _ := u.User.Password()
	q := u.Query()
	secure, err := strconv.ParseBool(q.Get("secure"))
	if err != nil {
		secure = true
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(u.User.Username(), secret, ""),
		Secure: secure,
		Region: q.Get("region"),
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if exists, err := client.BucketExists(ctx, bucket); err != nil || !exists {
		return
	}
	objects := client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true})
	for res := range client.RemoveObjects(ctx, bucket, objects, minio.RemoveObjectsOptions{}) {
		if res.Err != nil {
			t.Logf("cannot remove test object %q from bucket %q: %v", res.ObjectName, bucket, res.Err)
		}
	}
	if err := client.RemoveBucket(ctx, bucket); err != nil {
		t.Logf("cannot remove test bucket %q: %v", bucket, err)
	}
}

// findMinIO returns the path of the MinIO binary or fails the test with
// how to install it.
func findMinIO(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("MINIO_BIN"); bin != "" {
		if !isExecutable(bin) {
			t.Fatalf("MINIO_BIN=%q is not an executable file; install MinIO with `bash .ci/minio.sh` (%s)", bin, MinIOInstall)
		}
		return bin
	}
	var candidates []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 2 {
			if gobin := strings.TrimSpace(lines[0]); gobin != "" {
				candidates = append(candidates, filepath.Join(gobin, "minio"))
			}
			if gopath := filepath.SplitList(strings.TrimSpace(lines[1])); len(gopath) > 0 && gopath[0] != "" {
				candidates = append(candidates, filepath.Join(gopath[0], "bin", "minio"))
			}
		}
	}
	candidates = append(candidates, filepath.Join(build.Default.GOPATH, "bin", "minio"))
	if p, err := exec.LookPath("minio"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if isExecutable(c) {
			return c
		}
	}
	t.Fatalf("no MinIO server binary for the S3 tests (looked at $MINIO_BIN, %s and PATH); install it with `bash .ci/minio.sh`, which runs `%s`, or point MF_TEST_S3 at a server",
		strings.Join(candidates, ", "), MinIOInstall)
	return ""
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}

// startMinIO starts one MinIO server and waits until it is ready. It
// returns the host:port it serves, or why it did not start.
func startMinIO(t testing.TB, bin, user, password string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	consolePort, err := freePort()
	if err != nil {
		return "", err
	}
	endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir()
	logPath := filepath.Join(dir, "minio.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "server",
		"--address", endpoint,
		"--console-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(consolePort)),
		"--certs-dir", filepath.Join(dir, "certs"),
		"--quiet",
		filepath.Join(dir, "data"))
	cmd.Env = append(minioFreeEnv(),
		"MINIO_ROOT_USER="+user,
		"MINIO_ROOT_PASSWORD="+password,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("cannot run %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(minioStopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	ready := "http://" + endpoint + "/minio/health/ready"
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(minioReadyTimeout)
	for {
		resp, err := client.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("MinIO exited before it was ready (%v); its log:\n%s", err, tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("MinIO was not ready at %s within %v; its log:\n%s", ready, minioReadyTimeout, tail(logPath))
		}
	}
	// Ready answers before IAM is loaded; until then signed requests fail
	// with "Server not initialized yet". Wait for one to work.
	s3, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(user, password, "")})
	if err != nil {
		stop()
		return "", err
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s3.ListBuckets(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("MinIO did not answer signed requests within %v (%v); its log:\n%s", minioReadyTimeout, err, tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(stop) // runs before the removal of dir, registered earlier
	return endpoint, nil
}

// minioFreeEnv is the environment without MINIO_* variables, so a
// developer's settings cannot change the test server.
func minioFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (int, error) {
	p, err := freeport.Port()
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	return p, nil
}

// tail returns the end of a log file.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(bytes.TrimSpace(data))
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// redact hides the secret of an s3:// URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
