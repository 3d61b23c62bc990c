package evaluator

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The binary reader has two paths: fastFacts for the common form and
// binReader for everything. These tests check that the fast path reads
// exactly what the general one reads, wherever it reads at all.

// binaryFactsInputs returns the facts of every corpus case in binary form
// (AppendFactsBinary of the case's facts), and the vectors of
// testdata/facts_binary.jsonl.
func binaryFactsInputs(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		tb.Fatalf("cannot open testdata/corpus.jsonl: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct{ In string }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			tb.Fatalf("corpus line: %v", err)
		}
		var m struct{ Facts json.RawMessage }
		if c.In == "" || json.Unmarshal([]byte(c.In), &m) != nil || m.Facts == nil {
			continue
		}
		if b, err := AppendFactsBinary(nil, m.Facts); err == nil {
			out = append(out, b)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("cannot read testdata/corpus.jsonl: %v", err)
	}
	v, err := os.ReadFile("testdata/facts_binary.jsonl")
	if err != nil {
		tb.Fatalf("cannot read testdata/facts_binary.jsonl: %v", err)
	}
	for line := range strings.Lines(string(v)) {
		var vec struct{ Hex string }
		if err := json.Unmarshal([]byte(line), &vec); err != nil {
			tb.Fatalf("facts_binary.jsonl: %v", err)
		}
		b, err := hex.DecodeString(vec.Hex)
		if err != nil {
			tb.Fatalf("facts_binary.jsonl: %v", err)
		}
		out = append(out, b)
	}
	return out
}

// describeFacts writes out everything evaluation reads of fa.
func describeFacts(fa *Facts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id=%q/%v userId=%q/%v seg=%d in=%q unavailable=%q props=", fa.id, fa.idState, fa.userID, fa.userIDState, fa.seg, fa.segIn, fa.segUnavail)
	if fa.props == nil {
		b.WriteString("none")
		return b.String()
	}
	for i := 0; i+1 < len(fa.props.elems); i += 2 {
		fmt.Fprintf(&b, "%q:", fa.props.elems[i].str)
		describeValue(&b, &fa.props.elems[i+1])
		b.WriteByte(' ')
	}
	return b.String()
}

// describeValue writes what evaluation reads of a property: its kind, and
// for scalars their value (strings with their numeric reading), for lists
// their elements' kinds and scalar values; nothing of an object.
func describeValue(b *strings.Builder, v *value) {
	switch v.kind {
	case kindNull, kindObject:
		fmt.Fprintf(b, "k%d", v.kind)
	case kindBool:
		fmt.Fprintf(b, "%v", v.b)
	case kindNumber:
		fmt.Fprintf(b, "n%v", v.num)
	case kindString:
		fmt.Fprintf(b, "%q/%v/%v", v.str, v.b, v.num)
	case kindList:
		b.WriteByte('[')
		for i := range v.elems {
			if e := &v.elems[i]; e.kind == kindList {
				b.WriteString("k4")
			} else {
				describeValue(b, e)
			}
			b.WriteByte(',')
		}
		b.WriteByte(']')
	}
}

// readBoth reads data with the fast path (when it takes it) and with the
// general reader, each into a Facts that held other facts before, and
// fails when the fast path reads something else than the general reader.
// It reports whether the fast path took the input.
func readBoth(t *testing.T, data []byte, before []byte) bool {
	t.Helper()
	var fast, general Facts
	if before != nil {
		_ = ParseFactsBinaryInto(&fast, before)
		_ = ParseFactsBinaryInto(&general, before)
	}
	s := fast.mem.copyText(data)
	took := fastFacts(&fast, s, firstNonASCII(s))
	r := binReader{s: general.mem.copyText(data)}
	ok := r.facts(&general)
	if !took {
		return false
	}
	if !ok {
		t.Fatalf("%x: the fast path reads facts the general reader refuses (%s)", data, r.msg)
	}
	if f, g := describeFacts(&fast), describeFacts(&general); f != g {
		t.Fatalf("%x:\n fast:    %s\n general: %s", data, f, g)
	}
	return true
}

// TestFastFactsAgrees: on every corpus case's facts and every vector, the
// fast path reads what the general reader reads, and both paths are used.
func TestFastFactsAgrees(t *testing.T) {
	inputs := binaryFactsInputs(t)
	fast := 0
	var prev []byte
	for _, b := range inputs {
		if readBoth(t, b, prev) {
			fast++
		}
		prev = b
	}
	if fast == 0 || fast == len(inputs) {
		t.Errorf("the fast path took %d of %d inputs; both paths must be exercised", fast, len(inputs))
	}
}

// FuzzFactsBinaryPaths: on any bytes, the fast path reads what the general
// reader reads, and ParseFactsBinaryInto into a used Facts gives what
// ParseFactsBinary gives.
//
//	go test -fuzz=FuzzFactsBinaryPaths ./evaluator
func FuzzFactsBinaryPaths(f *testing.F) {
	for i, b := range binaryFactsInputs(f) {
		if i%20 == 0 {
			f.Add(b)
		}
	}
	var used Facts
	f.Fuzz(func(t *testing.T, data []byte) {
		readBoth(t, data, nil)
		want, wantErr := ParseFactsBinary(data)
		err := ParseFactsBinaryInto(&used, data)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%x: ParseFactsBinaryInto: %v, ParseFactsBinary: %v", data, err, wantErr)
		}
		if err == nil {
			if g, w := describeFacts(&used), describeFacts(want); g != w {
				t.Fatalf("%x:\n into: %s\n new:  %s", data, g, w)
			}
		}
	})
}

// TestFactsSameBytes: reading the bytes a Facts was last read from leaves
// it as it is; a failed read, or the other form, reads again.
func TestFactsSameBytes(t *testing.T) {
	a, err := AppendFactsBinary(nil, []byte(`{"id":"visitor-1","properties":{"plan":"pro"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var fa Facts
	if err := ParseFactsBinaryInto(&fa, a); err != nil {
		t.Fatal(err)
	}
	want := describeFacts(&fa)
	if err := ParseFactsBinaryInto(&fa, a); err != nil || describeFacts(&fa) != want {
		t.Errorf("the same bytes again: %v, %s; want %s", err, describeFacts(&fa), want)
	}
	if err := ParseFactsBinaryInto(&fa, a[:len(a)-1]); err == nil {
		t.Fatal("truncated facts read")
	}
	if got := describeFacts(&fa); got != describeFacts(&Facts{}) {
		t.Errorf("after an error the facts are %s, want empty facts", got)
	}
	if err := ParseFactsBinaryInto(&fa, a); err != nil || describeFacts(&fa) != want {
		t.Errorf("after an error, the bytes again: %v, %s; want %s", err, describeFacts(&fa), want)
	}
	js := []byte(`{"id":"visitor-2"}`)
	if err := ParseFactsInto(&fa, js); err != nil {
		t.Fatal(err)
	}
	if err := ParseFactsInto(&fa, js); err != nil || fa.id != "visitor-2" {
		t.Errorf("JSON again: %v, id %q", err, fa.id)
	}
	// The same bytes in the other form are other facts (here: refused).
	if err := ParseFactsBinaryInto(&fa, js); err == nil {
		t.Errorf("JSON text read as binary facts")
	}
}

// TestPlaceholderLengths: checkID looks for placeholders only at their
// lengths; every placeholder, in any case and padded, is found.
func TestPlaceholderLengths(t *testing.T) {
	for _, p := range placeholders {
		for _, id := range []string{p, strings.ToUpper(p), " " + p + "\t", `"` + p + `"`} {
			if s := checkID(id); s != idPlaceholder {
				t.Errorf("checkID(%q) = %v, want a placeholder", id, s)
			}
		}
	}
}
