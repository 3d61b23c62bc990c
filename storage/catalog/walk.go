package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// The provisioning file is read in two steps: decoded into generic JSON
// values (objects, lists, strings, json.Number, bools, nil), then walked by
// the rules, so that every fault names the exact JSON path, wrong types are
// faults rather than decoder errors, and unknown fields are ignored.

// decodeJSON decodes one JSON value and refuses trailing data.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// typeName names a JSON value's type for fault messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// walker reads one JSON object, recording faults against its path.
type walker struct {
	fs   *faults
	path string
	m    map[string]any
}

// object returns a walker over v, or ok false (and a fault) when v is not an
// object.
func object(fs *faults, path string, v any) (walker, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		fs.add(path, "must be an object, not %s", typeName(v))
		return walker{}, false
	}
	return walker{fs: fs, path: path, m: m}, true
}

func (w walker) at(name string) string { return pathField(w.path, name) }

// get returns a field; null counts as absent.
func (w walker) get(name string) (any, bool) {
	v, ok := w.m[name]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// has reports whether a field is present and not null.
func (w walker) has(name string) bool {
	_, ok := w.get(name)
	return ok
}

// str reads a string field. A required field that is absent or null is a
// fault; ok is false when the field is absent or not a string.
func (w walker) str(name string, required bool) (string, bool) {
	v, ok := w.get(name)
	if !ok {
		if required {
			w.fs.add(w.at(name), "is required")
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		w.fs.add(w.at(name), "must be a string, not %s", typeName(v))
		return "", false
	}
	return s, true
}

// boolean reads an optional boolean field (absent or null: false).
func (w walker) boolean(name string) bool {
	v, ok := w.get(name)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		w.fs.add(w.at(name), "must be true or false, not %s", typeName(v))
		return false
	}
	return b
}

// boolDefault reads an optional boolean field with a default.
func (w walker) boolDefault(name string, def bool) bool {
	if !w.has(name) {
		return def
	}
	return w.boolean(name)
}

// integer reads an integer field.
func (w walker) integer(name string, required bool) (int64, bool) {
	v, ok := w.get(name)
	if !ok {
		if required {
			w.fs.add(w.at(name), "is required")
		}
		return 0, false
	}
	return asInteger(w.fs, w.at(name), v)
}

// asInteger reads a JSON integer: a number without fraction or exponent
// that fits in 53 bits.
func asInteger(fs *faults, path string, v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		fs.add(path, "must be an integer, not %s", typeName(v))
		return 0, false
	}
	i, err := n.Int64()
	if err != nil || math.Abs(float64(i)) > 1<<53 {
		fs.add(path, "must be an integer, not %s", string(n))
		return 0, false
	}
	return i, true
}

// list reads a list field.
func (w walker) list(name string, required bool) ([]any, bool) {
	v, ok := w.get(name)
	if !ok {
		if required {
			w.fs.add(w.at(name), "is required")
		}
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		w.fs.add(w.at(name), "must be a list, not %s", typeName(v))
		return nil, false
	}
	return l, true
}

// strings reads an optional list of strings.
func (w walker) strings(name string) []string {
	l, ok := w.list(name, false)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l))
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			w.fs.add(pathIndex(w.at(name), i), "must be a string, not %s", typeName(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

// oneOf checks that s is one of the allowed values.
func oneOf(fs *faults, path, s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	fs.add(path, "must be one of %s, not %q", quoteList(allowed), clip(s))
	return false
}

func quoteList(l []string) string {
	var b bytes.Buffer
	for i, s := range l {
		if i > 0 {
			if i == len(l)-1 {
				b.WriteString(" or ")
			} else {
				b.WriteString(", ")
			}
		}
		fmt.Fprintf(&b, "%q", s)
	}
	return b.String()
}

// clip shortens a value quoted in a fault message.
func clip(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

// text checks a human-readable text: at most max code points and, when
// required, not empty or only white space.
func text(fs *faults, path, s string, required bool, max int) {
	if required && isBlank(s) {
		fs.add(path, "must not be empty")
		return
	}
	if n := utf8.RuneCountInString(s); n > max {
		fs.add(path, "must be at most %d characters, not %d", max, n)
	}
}

func isBlank(s string) bool {
	for _, r := range s {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xa0:
		default:
			return false
		}
	}
	return true
}
