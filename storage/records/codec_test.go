package records

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// readBatchJSON reads the JSON view of a Batch from a testdata file.
func readBatchJSON(t *testing.T, path string) *Batch {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	var b Batch
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("cannot parse %s: %v", path, err)
	}
	return &b
}

func TestRoundTripVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in testdata/vectors (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := readBatchJSON(t, f)
			data, err := Encode(want)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if data[0] != Version {
				t.Fatalf("first byte %d, want version %d", data[0], Version)
			}
			if hint := sizeHint(want); len(data) > hint {
				t.Fatalf("encoded %d bytes, above the size hint %d", len(data), hint)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, want)
			}
			// The decoded batch must not alias the input.
			for i := range data {
				data[i] = 0xee
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded batch changed when the input bytes were overwritten")
			}
			// Append keeps what was in dst.
			prefixed, err := Append([]byte("xyz"), want)
			if err != nil || string(prefixed[:3]) != "xyz" {
				t.Fatalf("Append lost its prefix: %q, %v", prefixed[:3], err)
			}
			if again, err := Decode(prefixed[3:]); err != nil || !reflect.DeepEqual(again, want) {
				t.Fatalf("Append wrote something else than Encode: %v", err)
			}
		})
	}
}

func TestTruncatedRecordsAreRefused(t *testing.T) {
	files, _ := filepath.Glob("testdata/vectors/*.json")
	for _, f := range files {
		data, err := Encode(readBatchJSON(t, f))
		if err != nil {
			t.Fatalf("%s: Encode: %v", f, err)
		}
		for n := 0; n < len(data); n++ {
			if _, err := Decode(data[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: prefix of %d of %d bytes: got %v, want ErrCorrupt", f, n, len(data), err)
			}
		}
	}
}

func TestEncodeRefusesInvalidBatches(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/invalid (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b := readBatchJSON(t, f)
			out, err := Append([]byte("keep"), b)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Append: got %v, want ErrInvalid", err)
			}
			if string(out) != "keep" {
				t.Fatalf("Append changed dst on error: %q", out)
			}
		})
	}
}

type hexCase struct {
	name, expect string
	data         []byte
}

func readHexCases(t *testing.T, path string) []hexCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("cannot open %s: %v", path, err)
	}
	defer f.Close()
	var cases []hexCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "\t")
		if len(parts) != 3 {
			t.Fatalf("%s: line %q: want name, hex and expectation separated by tabs", path, line)
		}
		data, err := hex.DecodeString(strings.ReplaceAll(parts[1], " ", ""))
		if err != nil {
			t.Fatalf("%s: case %s: bad hex: %v", path, parts[0], err)
		}
		cases = append(cases, hexCase{name: parts[0], data: data, expect: parts[2]})
	}
	if err := sc.Err(); err != nil || len(cases) == 0 {
		t.Fatalf("%s: no cases (%v)", path, err)
	}
	return cases
}

func TestDecodeRefusesCorruptRecords(t *testing.T) {
	for _, c := range readHexCases(t, "testdata/corrupt.txt") {
		t.Run(c.name, func(t *testing.T) {
			want := map[string]error{"version": ErrUnknownVersion, "corrupt": ErrCorrupt}[c.expect]
			if want == nil {
				t.Fatalf("unknown expectation %q", c.expect)
			}
			b, err := Decode(c.data)
			if !errors.Is(err, want) || b != nil {
				t.Fatalf("Decode = %v, %v; want nil, %v", b, err, want)
			}
		})
	}
}

func TestDecodeHandWrittenRecords(t *testing.T) {
	for _, c := range readHexCases(t, "testdata/valid.txt") {
		t.Run(c.name, func(t *testing.T) {
			var want Batch
			if err := json.Unmarshal([]byte(c.expect), &want); err != nil {
				t.Fatalf("bad expectation: %v", err)
			}
			got, err := Decode(c.data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("got %+v\nwant %+v", got, &want)
			}
			again, err := Encode(got)
			if err != nil || !bytes.Equal(again, c.data) {
				t.Fatalf("re-encoding gives % x (%v), want % x", again, err, c.data)
			}
		})
	}
}

func TestUUIDText(t *testing.T) {
	for _, c := range []struct {
		in   string
		ok   bool
		text string
	}{
		{"0B6F3C1E-4A8D-4F51-9A3E-2b7c5d9e1f00", true, "0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00"},
		{"00000000-0000-0000-0000-000000000000", true, "00000000-0000-0000-0000-000000000000"},
		{"0b6f3c1e4a8d4f519a3e2b7c5d9e1f00", false, ""},
		{"{0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f00}", false, ""},
		{"0b6f3c1e-4a8d-4f51-9a3e-2b7c5d9e1f0g", false, ""},
		{"0b6f3c1e-4a8d-4f51-9a3e_2b7c5d9e1f00", false, ""},
		{"", false, ""},
	} {
		u, ok := ParseUUID(c.in)
		if ok != c.ok || (ok && u.String() != c.text) {
			t.Errorf("ParseUUID(%q) = %s, %v; want %s, %v", c.in, u, ok, c.text, c.ok)
		}
	}
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/vectors/*.json")
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var b Batch
		if err := json.Unmarshal(raw, &b); err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		data, err := Encode(&b)
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		f.Add(data)
	}
	var seed []byte
	if len(files) > 0 {
		raw, _ := os.ReadFile(files[0])
		var b Batch
		_ = json.Unmarshal(raw, &b)
		seed, _ = Encode(&b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data)
		// DecodeShared, into a batch that held another one, agrees.
		var shared Batch
		if seed != nil {
			if err := DecodeShared(seed, &shared); err != nil {
				t.Fatal(err)
			}
		}
		serr := DecodeShared(data, &shared)
		if (err == nil) != (serr == nil) || err != nil && err.Error() != serr.Error() {
			t.Fatalf("Decode: %v, DecodeShared: %v", err, serr)
		}
		if err == nil && !reflect.DeepEqual(normalized(b), normalized(&shared)) {
			t.Fatalf("DecodeShared gives another batch than Decode:\n%+v\n%+v", b, &shared)
		}
		if err != nil {
			if b != nil {
				t.Fatalf("Decode returned a batch with error %v", err)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("Decode error %v is neither ErrCorrupt nor ErrUnknownVersion", err)
			}
			return
		}
		again, err := Encode(b)
		if err != nil {
			t.Fatalf("a decoded batch cannot be encoded: %v", err)
		}
		if len(again) > len(data) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(data), len(again))
		}
		b2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("decode(encode(decode(x))) differs from decode(x)")
		}
	})
}

// normalized is b with empty byte slices as nil, for comparing batches
// decoded with and without copies.
func normalized(b *Batch) *Batch {
	c := *b
	c.Events = slices.Clone(b.Events)
	if len(c.Edge.VisitorHash) == 0 {
		c.Edge.VisitorHash = nil
	}
	for i := range c.Events {
		if len(c.Events[i].Properties) == 0 {
			c.Events[i].Properties = nil
		}
	}
	if len(c.Events) == 0 {
		c.Events = nil
	}
	return &c
}

// TestDecodeSharedAgrees decodes every vector with and without copies,
// into a batch reused from one vector to the next.
func TestDecodeSharedAgrees(t *testing.T) {
	files, _ := filepath.Glob("testdata/vectors/*.json")
	if len(files) < 3 {
		t.Fatalf("%d vectors", len(files))
	}
	var shared Batch
	for _, p := range append(files, files...) {
		b := readBatchJSON(t, p)
		data, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeShared(data, &shared); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalized(want), normalized(&shared)) {
			t.Fatalf("%s: DecodeShared gives\n%+v\nwant\n%+v", p, &shared, want)
		}
	}
	if err := DecodeShared([]byte{Version, 0xff}, &shared); err == nil || shared.Project != "" || len(shared.Events) != 0 {
		t.Fatalf("a corrupt record decoded: %v %+v", err, shared)
	}
}
