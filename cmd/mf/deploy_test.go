package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnits checks deploy/*.service with `systemd-analyze verify`
// (the binary path pointed at the one built for the tests), and that each
// unit starts an mf command that exists.
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is needed to check deploy/*.service: bash .ci/tools.sh (apt-get install systemd)")
	}
	units, err := filepath.Glob("../../deploy/*.service")
	if err != nil || len(units) < 4 {
		t.Fatalf("deploy/ holds %d units (%v); want mf serve and the three roles", len(units), err)
	}
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		raw, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		var cmd string
		for _, line := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/mf "); ok {
				cmd = strings.Fields(rest)[0]
			}
		}
		if cmd == "" {
			t.Fatalf("%s does not start /usr/local/bin/mf", u)
		}
		if code, _, errOut := runMF(t, nil, cmd, "-h"); code != 0 {
			t.Errorf("%s starts `mf %s`, which does not exist: %s", u, cmd, errOut)
		}
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "/usr/local/bin/mf", mfBinary)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
