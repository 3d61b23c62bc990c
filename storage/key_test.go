package storage_test

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mfhq/mf/storage"
)

func TestValidateKeyAndPrefix(t *testing.T) {
	type kase struct {
		what, s string
		ok      bool
	}
	seg := strings.Repeat("s", storage.MaxSegmentLen)
	cases := []kase{
		{"key", seg, true},
		{"key", seg + "s", false},
		{"key", strings.Join([]string{seg, seg, seg, seg}, "/"), true},  // 1023 bytes
		{"key", strings.Repeat("k/", storage.MaxKeyLen/2) + "k", false}, // 1025 bytes
		{"prefix", seg + "s", false},
		{"prefix", strings.Repeat("p", storage.MaxKeyLen+1), false},
	}
	f, err := os.Open("testdata/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		quoted := strings.TrimSpace(line[strings.IndexByte(line, '"'):])
		s, err := strconv.Unquote(quoted)
		if len(fields) < 3 || err != nil {
			t.Fatalf("testdata/keys.txt: bad line %q", line)
		}
		cases = append(cases, kase{fields[0], s, fields[1] == "ok"})
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases read", len(cases))
	}
	for _, c := range cases {
		validate := storage.ValidateKey
		if c.what == "prefix" {
			validate = storage.ValidatePrefix
		}
		err := validate(c.s)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s %.50q: %v, want valid", c.what, c.s, err)
		case !c.ok && err == nil:
			t.Errorf("%s %.50q: valid, want ErrInvalidKey", c.what, c.s)
		case !c.ok && !errors.Is(err, storage.ErrInvalidKey):
			t.Errorf("%s %.50q: %v, want ErrInvalidKey", c.what, c.s, err)
		}
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"a/b", "a//b", "../x", "a/./b", ".a/b."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if storage.ValidateKey(key) != nil {
			return
		}
		// A valid key is a valid prefix, and maps to a path that cannot
		// leave the store directory.
		if err := storage.ValidatePrefix(key); err != nil {
			t.Fatalf("valid key %q is not a valid prefix: %v", key, err)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("valid key %q has segment %q", key, seg)
			}
		}
		if strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00 ") {
			t.Fatalf("valid key %q", key)
		}
	})
}
