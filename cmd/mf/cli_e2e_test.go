package main

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHelpExitsZero runs `mf <command> -h` for every command
// (testdata/cli/help.json): each prints its usage on stdout, nothing on
// stderr, and exits 0; a role lists only the flags it reads.
func TestHelpExitsZero(t *testing.T) {
	var cases []struct {
		Args        []string
		Has, HasNot []string
	}
	readJSON(t, "testdata/cli/help.json", &cases)
	for _, c := range cases {
		t.Run(strings.Join(c.Args, " "), func(t *testing.T) {
			code, out, errOut := runMF(t, nil, c.Args...)
			if code != 0 || errOut != "" {
				t.Fatalf("mf %v: exit %d, stderr %q; want 0 and nothing on stderr", c.Args, code, errOut)
			}
			for _, s := range c.Has {
				if !strings.Contains(out, s) {
					t.Errorf("mf %v does not print %q:\n%s", c.Args, s, out)
				}
			}
			for _, s := range c.HasNot {
				if strings.Contains(out, s+"\n") || strings.Contains(out, s+" ") {
					t.Errorf("mf %v lists %s, which it does not read:\n%s", c.Args, s, out)
				}
			}
		})
	}
}

// TestMistakesNameTheNearest: an unknown flag or command exits 2 and
// names the nearest valid one (testdata/cli/mistakes.json).
func TestMistakesNameTheNearest(t *testing.T) {
	var cases []struct {
		Args   []string
		Stderr string
	}
	readJSON(t, "testdata/cli/mistakes.json", &cases)
	for _, c := range cases {
		code, _, errOut := runMF(t, nil, c.Args...)
		if code != 2 || !strings.Contains(errOut, c.Stderr) {
			t.Errorf("mf %v: exit %d, stderr %q; want 2 and %q", c.Args, code, errOut, c.Stderr)
		}
	}
}

// TestVersion: `mf version` and `mf --version` print mf's own version and
// the Go version of the build.
func TestVersion(t *testing.T) {
	code, out, _ := runMF(t, nil, "version")
	code2, out2, _ := runMF(t, nil, "--version")
	if code != 0 || code2 != 0 || out != out2 {
		t.Fatalf("mf version: %d %q; mf --version: %d %q; want both 0 and the same", code, out, code2, out2)
	}
	if !strings.HasPrefix(out, "mf "+mfVersion+" (") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("mf version printed %q; want mf %s with the build's Go version %s", out, mfVersion, runtime.Version())
	}
}

// TestBannerHoldsNoSecret starts mf with the demo provisioning file and
// checks that no secret key or API key of the file appears in full in
// what it prints (only their public prefix), unless --print-secrets asks
// for them (the demo of `go tool task run`).
func TestBannerHoldsNoSecret(t *testing.T) {
	var f struct {
		Users []struct {
			APIKeys []struct{ Token string } `json:"apiKeys"`
		}
		Organizations []struct {
			Projects []struct {
				Sources []struct{ Kind, Key string }
			}
		}
	}
	readJSON(t, demoFile, &f)
	var secrets []string
	for _, u := range f.Users {
		for _, k := range u.APIKeys {
			secrets = append(secrets, k.Token)
		}
	}
	for _, o := range f.Organizations {
		for _, p := range o.Projects {
			for _, s := range p.Sources {
				if s.Kind == "server" {
					secrets = append(secrets, s.Key)
				}
			}
		}
	}
	if len(secrets) < 2 {
		t.Fatalf("the demo file has %d secrets; the test needs a server key and an API key", len(secrets))
	}
	for _, printSecrets := range []bool{false, true} {
		args := []string{"--provision", demoFile}
		if printSecrets {
			args = append(args, "--print-secrets")
		}
		p := startMF(t, t.TempDir(), "serve", args...)
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.out.String(), "provisioned from") })
		if c := p.stop(time.Minute); c != 0 {
			t.Fatalf("mf serve: exit %d", c)
		}
		out := p.out.String()
		for _, s := range secrets {
			if strings.Contains(out, s) != printSecrets {
				t.Errorf("--print-secrets=%v: the output holds %q: %v, want %v:\n%s", printSecrets, s, !printSecrets, printSecrets, out)
			}
			if prefix := secretPrefix(s); !printSecrets && !strings.Contains(out, prefix) {
				t.Errorf("the output does not name the key %s", prefix)
			}
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
