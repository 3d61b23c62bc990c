package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mfhq/mf/evaluator/internal/corpusgen/oracle"
)

// Building blocks for case lines, written as exact JSON text.
type (
	// M is an object written with its keys sorted.
	M map[string]any
	// O is an object written in the given order, repeated keys allowed.
	O []KV
	// KV is one member of O.
	KV struct {
		K string
		V any
	}
	// L is a list.
	L []any
	// Raw is JSON text written as it is.
	Raw string
)

// absent marks a member to leave out.
type absentT struct{}

var absent = absentT{}

func enc(v any) string {
	var b strings.Builder
	encTo(&b, v)
	return b.String()
}

func encTo(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case Raw:
		b.WriteString(string(t))
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case int:
		b.WriteString(strconv.Itoa(t))
	case float64:
		b.WriteString(strconv.FormatFloat(t, 'g', -1, 64))
	case string:
		b.WriteString(jstr(t))
	case L:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			encTo(b, e)
		}
		b.WriteByte(']')
	case M:
		keys := make([]string, 0, len(t))
		for k, e := range t {
			if e != absent {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jstr(k))
			b.WriteByte(':')
			encTo(b, t[k])
		}
		b.WriteByte('}')
	case O:
		b.WriteByte('{')
		n := 0
		for _, kv := range t {
			if kv.V == absent {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			b.WriteString(jstr(kv.K))
			b.WriteByte(':')
			encTo(b, kv.V)
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("corpusgen: cannot encode a %T", v)) // a bug in the generator's case tables
	}
}

// jstr writes s as a JSON string, non-ASCII as UTF-8, without HTML escapes.
func jstr(s string) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

type kase struct {
	name string
	line []byte
}

// encode writes the corpus line of the case, with the oracle's answer.
func (c kase) encode() []byte {
	want := oracle.Eval(c.line)
	var b strings.Builder
	b.WriteString(`{"name":`)
	b.WriteString(jstr(c.name))
	if utf8.Valid(c.line) {
		b.WriteString(`,"in":`)
		b.WriteString(jstr(string(c.line)))
	} else {
		b.WriteString(`,"in64":`)
		b.WriteString(jstr(base64.StdEncoding.EncodeToString(c.line)))
	}
	b.WriteString(`,"want":`)
	b.WriteString(jstr(want))
	b.WriteString("}\n")
	return []byte(b.String())
}
