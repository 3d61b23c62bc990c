package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/mfhq/mf/storage/eventlog/natstest"
)

// writeTestCA makes a throwaway CA and a server certificate for
// 127.0.0.1 signed by it, written as PEM files under dir: ca.pem,
// server.pem, server-key.pem.
func writeTestCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mf test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}

// TestSecuredLog runs mf serve on a real nats-server that requires TLS
// (a certificate of a CA made by the test) and an NKey user: with
// --log tls://…, --log-tls-ca and --log-nkey mf takes batches and counts
// them; without the NKey, or without the CA, it stops at once with an
// error that says why, and the seed is in no output.
func TestSecuredLog(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCA(t, dir)
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(dir, "mf.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	nkeyOpt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n}\nauthorization {\n  users = [ { nkey: %q } ]\n}\n", certFile, keyFile, pub)
	srv := natstest.StartServer(t, "tls", conf, nats.RootCAs(caFile), nkeyOpt)

	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--log", srv.URL(), "--log-tls-ca", caFile, "--log-nkey", seedFile)
	for i := range 3 {
		body := batchBody(fmt.Sprintf("7e7e7e7e-0000-4000-8000-%012d", i), "full",
			fmt.Sprintf(`{"name":"$pageview","anonymousId":"tls-%d","page":{"url":"https://shop.example/"}}`, i))
		code, _, b := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			t.Fatalf("batch %d over TLS: %d %s", i, code, b)
		}
	}
	waitForEvery(t, 30*time.Second, 500*time.Millisecond, func() bool { return overviewNumbers(t, p.api)["people"] == 3.0 })
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM", c)
	}
	if strings.Contains(p.out.String(), string(seed)) {
		t.Error("mf's output holds the NKey seed")
	}

	// Refused credentials and an unknown CA end the start at once.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no NKey", []string{"--log-tls-ca", caFile}, "authorization"},
		{"no CA", []string{"--log-nkey", seedFile}, "certificate"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		args := append([]string{"serve", "--data", t.TempDir(), "--log", srv.URL(), "--ingest-addr", freeAddr(t),
			"--api-addr", freeAddr(t), "--admin-addr", freeAddr(t)}, tc.args...)
		out, err := exec.CommandContext(ctx, mfBinary, args...).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Errorf("%s: mf still trying after 30s; output:\n%s", tc.name, tail(string(out), 3000))
			continue
		}
		if err == nil || !strings.Contains(strings.ToLower(string(out)), tc.want) {
			t.Errorf("%s: %v, want an exit naming %q; output:\n%s", tc.name, err, tc.want, tail(string(out), 3000))
		}
		if strings.Contains(string(out), string(seed)) {
			t.Errorf("%s: the output holds the NKey seed", tc.name)
		}
	}
}
