package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImportThroughBinary loads search-console rows with `mf import`
// through the admin API and offline: a new file is stored, the same file
// again changes nothing, a bad row is refused naming its line and field
// with nothing stored, an account the project's provider does not list
// and an unknown project are refused.
func TestImportThroughBinary(t *testing.T) {
	data := t.TempDir()
	dir := t.TempDir()
	p := startMF(t, data, "serve", "--provision", demoFile)
	day := func(back int) string { return time.Now().UTC().AddDate(0, 0, -back).Format(time.DateOnly) }
	write := func(name string, rows ...string) string {
		path := filepath.Join(dir, name)
		body := `{"version":1,"source":"search_import_a","engine":"engine_a"}` + "\n" + strings.Join(rows, "\n") + "\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	row := func(back, clicks int) string {
		return fmt.Sprintf(`{"account":"sc-domain:shop.example","day":%q,"clicks":%d,"impressions":%d,"position":2.5}`, day(back), clicks, clicks*10)
	}
	good := write("good.jsonl", row(5, 3), row(4, 7))
	remote := []string{"import", "--admin-url", p.admin, "--project", demoProject}

	code, out, errOut := runMF(t, nil, append(remote, good)...)
	if code != 0 || !strings.Contains(out, "imported 2 rows of search_import_a") || !strings.Contains(out, "2 added") {
		t.Fatalf("first import: exit %d\n%s%s", code, out, errOut)
	}
	// Progress on stderr (not a terminal: a last line once done).
	if !strings.Contains(errOut, "import: done, 100% (") {
		t.Fatalf("first import: no progress on stderr:\n%s", errOut)
	}
	code, out, errOut = runMF(t, nil, append(remote, good)...)
	if code != 0 || !strings.Contains(out, "nothing to change") {
		t.Fatalf("same import again: exit %d\n%s%s", code, out, errOut)
	}
	bad := write("bad.jsonl", row(3, 1), `{"account":"sc-domain:shop.example","day":"`+day(2)+`","clicks":"many","impressions":1,"position":1}`)
	code, out, errOut = runMF(t, nil, append(remote, bad)...)
	if code != 1 || !strings.Contains(errOut, "line 3") || !strings.Contains(errOut, "clicks") {
		t.Fatalf("bad row: exit %d, want 1 naming line 3 and clicks\n%s%s", code, out, errOut)
	}
	foreign := write("foreign.jsonl", `{"account":"sc-domain:other.example","day":"`+day(2)+`","clicks":1,"impressions":1,"position":1}`)
	if code, out, errOut = runMF(t, nil, append(remote, foreign)...); code != 1 || !strings.Contains(errOut, "other.example") {
		t.Fatalf("foreign account: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runMF(t, nil, "import", "--admin-url", p.admin, "--project", "00000000-0000-4000-8000-000000000000", good); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("unknown project: exit %d\n%s%s", code, out, errOut)
	}
	if c := p.stop(time.Minute); c != 0 {
		t.Fatalf("exit %d on SIGTERM", c)
	}

	// Offline on --data: the bad row's file stored nothing, so its good
	// row is new now, and the two rows of the first file are unchanged.
	more := write("more.jsonl", row(5, 3), row(4, 7), row(3, 1))
	code, out, errOut = runMF(t, nil, "import", "--data", data, "--project", demoProject, more)
	if code != 0 || !strings.Contains(out, "1 added, 0 replaced, 2 unchanged") {
		t.Fatalf("offline import: exit %d\n%s%s", code, out, errOut)
	}
}
