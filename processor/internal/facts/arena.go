package facts

import (
	"encoding/binary"
	"slices"
	"strings"
	"unsafe"
)

// The strings of the events kept in memory (names, page addresses, titles,
// referrers, properties, amounts, matched actions) live in an arena per
// day: chunks of bytes the garbage collector never scans, freed with the
// day when it is frozen. An event refers to each string by a 4-byte sref
// instead of a 16-byte string header pointing to its own allocation.

// sref locates a string in a day's arena: 0 is "", otherwise 1 + the
// offset of its length (uvarint) in the arena, or, with bigRef set, the
// index of a string kept on its own.
type sref uint32

const (
	arenaChunk = 64 << 10 // bytes per chunk
	bigRef     = sref(1) << 31
	// maxDedupe bounds the strings a day remembers to share repeats.
	maxDedupe = 1 << 16
	// maxChunks keeps offsets under bigRef.
	maxChunks = int(bigRef)/arenaChunk - 1
)

// arena holds the strings of one day. Chunks are only ever appended to,
// so the strings handed out (which point into them) never change.
type arena struct {
	chunks [][]byte
	big    []string // strings that do not fit a chunk (or past 2 GiB)
	dedupe map[string]sref
}

// put stores s and returns its ref. share looks the string up first, so
// that repeated values (paths, titles, names) are stored once.
func (a *arena) put(s string, share bool) sref {
	if s == "" {
		return 0
	}
	if share {
		if r, ok := a.dedupe[s]; ok {
			return r
		}
	}
	var r sref
	need := len(s) + binary.MaxVarintLen32
	last := len(a.chunks) - 1
	full := last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < need
	if len(s) > arenaChunk/4 || full && len(a.chunks) >= maxChunks {
		r = bigRef | sref(len(a.big))
		a.big = append(a.big, strings.Clone(s))
	} else {
		if full {
			a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
			last++
		}
		c := a.chunks[last]
		r = sref(last*arenaChunk+len(c)) + 1
		c = binary.AppendUvarint(c, uint64(len(s)))
		c = append(c, s...)
		a.chunks[last] = c
	}
	if share && len(a.dedupe) < maxDedupe {
		if a.dedupe == nil {
			a.dedupe = map[string]sref{}
		}
		// The key is the arena's own copy: no separate allocation.
		a.dedupe[a.get(r)] = r
	}
	return r
}

// get returns the string of r. It points into the arena (no copy): state
// that outlives the day must intern it (Engine.in) instead of keeping it.
func (a *arena) get(r sref) string { return getString(a.chunks, a.big, r) }

// arenaView is an arena's strings as they were when the view was taken.
// The bytes of a string never change once stored and chunks never move,
// so the view can be read on another goroutine while the arena grows:
// only the arena's lists of chunks and big strings, which growing
// rewrites, are copied (a few headers).
type arenaView struct {
	chunks [][]byte
	big    []string
}

// view returns a view of the strings stored so far.
func (a *arena) view() *arenaView {
	return &arenaView{chunks: slices.Clone(a.chunks), big: a.big[:len(a.big):len(a.big)]}
}

func (v arenaView) get(r sref) string { return getString(v.chunks, v.big, r) }

func getString(chunks [][]byte, big []string, r sref) string {
	switch {
	case r == 0:
		return ""
	case r&bigRef != 0:
		return big[r&^bigRef]
	}
	off := int(r - 1)
	c := chunks[off/arenaChunk]
	i := off % arenaChunk
	n, k := binary.Uvarint(c[i:])
	if n == 0 {
		return ""
	}
	return unsafe.String(&c[i+k], int(n))
}
