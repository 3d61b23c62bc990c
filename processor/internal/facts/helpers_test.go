package facts

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// readTSV reads tab-separated test cases, skipping comments.
func readTSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		out = append(out, strings.Split(sc.Text(), "\t"))
	}
	if len(out) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return out
}

func TestAmounts(t *testing.T) {
	for _, c := range readTSV(t, "testdata/amounts.tsv") {
		got, ok := ParseAmount(c[0])
		if c[1] == "bad" {
			if ok {
				t.Errorf("ParseAmount(%q) = %d, want refusal", c[0], got)
			}
			continue
		}
		if !ok || strings.TrimSpace(c[1]) != itoa(got) {
			t.Errorf("ParseAmount(%q) = %d, %v; want %s", c[0], got, ok, c[1])
			continue
		}
		if f := FormatAmount(got); f != c[2] {
			t.Errorf("FormatAmount(%d) = %q, want %q", got, f, c[2])
		}
	}
}

func itoa(v int64) string {
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
		v = -v
	}
	s := ""
	for {
		s = string(rune('0'+v%10)) + s
		v /= 10
		if v == 0 {
			break
		}
	}
	b.WriteString(s)
	return b.String()
}

func TestGlob(t *testing.T) {
	for _, c := range readTSV(t, "testdata/globs.tsv") {
		if got := globMatch(c[0], c[1]); got != (c[2] == "1") {
			t.Errorf("globMatch(%q, %q) = %v, want %s", c[0], c[1], got, c[2])
		}
	}
}

func TestMoney(t *testing.T) {
	var m Money
	m.Add("USD", 1_500_000)
	m.Add("EUR", 2_000_000)
	m.Add("USD", -500_000)
	if len(m) != 2 || m[0].Currency != "EUR" || m.Of("USD") != 1_000_000 || m.Of("GBP") != 0 {
		t.Fatalf("money %v", m)
	}
	m.Add("EUR", maxMicro)
	if m.Of("EUR") != 2_000_000 {
		t.Fatalf("an overflowing addition was counted: %v", m)
	}
}
