package rollups

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/storage"
)

func TestBufferPoolHandsOutZeroedAlignedBuffers(t *testing.T) {
	p := NewBufferPool(1 << 20)
	for _, size := range []int{0, 1, 63, 64, 65, 1000, 4096, 100_000} {
		b := p.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d) has length %d", size, len(b))
		}
		if size > 0 && addressOf(b)%64 != 0 {
			t.Errorf("Allocate(%d) is not 64-byte aligned", size)
		}
		for i := range b {
			b[i] = 0xff
		}
		p.Free(b)
		again := p.Allocate(size)
		if size > 0 && addressOf(again) != addressOf(b) {
			t.Errorf("Allocate(%d) after Free did not reuse the buffer", size)
		}
		if i := bytes.IndexFunc(again, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Errorf("Allocate(%d) reused a buffer without zeroing it (byte %d)", size, i)
		}
		p.Free(again)
	}
	if s := p.Stats(); s.Reused == 0 || s.Allocations != 16 {
		t.Errorf("stats %+v, want 16 allocations with reuse", s)
	}
}

func TestBufferPoolReallocate(t *testing.T) {
	p := NewBufferPool(1 << 20)
	b := p.Allocate(10)
	copy(b, "0123456789")
	// Within the size class: in place, the gained bytes zeroed.
	b = b[:10]
	g := p.Reallocate(40, b)
	if addressOf(g) != addressOf(b) || string(g[:10]) != "0123456789" || !bytes.Equal(g[10:], make([]byte, 30)) {
		t.Fatalf("in-place Reallocate gave %q", g)
	}
	// Beyond it: moved, content kept, the old buffer back in the pool.
	m := p.Reallocate(1000, g)
	if string(m[:10]) != "0123456789" || len(m) != 1000 || !bytes.Equal(m[10:], make([]byte, 990)) {
		t.Fatalf("moving Reallocate lost the content")
	}
	if s := p.Stats(); s.KeptBytes != 64 {
		t.Errorf("kept %d bytes after a move, want the old 64-byte buffer", s.KeptBytes)
	}
	// Shrinking keeps the buffer.
	if s := p.Reallocate(5, m); addressOf(s) != addressOf(m) || string(s) != "01234" {
		t.Errorf("shrinking Reallocate gave %q", s)
	}
}

func TestBufferPoolKeepsAtMostMaxBytes(t *testing.T) {
	p := NewBufferPool(4096)
	var bs [][]byte
	for range 10 {
		bs = append(bs, p.Allocate(1024))
	}
	for _, b := range bs {
		p.Free(b)
	}
	if s := p.Stats(); s.KeptBytes != 4096 {
		t.Errorf("kept %d bytes, want at most 4096", s.KeptBytes)
	}
	// Buffers it did not hand out are left alone.
	p = NewBufferPool(1 << 20)
	p.Free(make([]byte, 100))
	p.Free(make([]byte, 0, 1000))
	if s := p.Stats(); s.KeptBytes != 0 {
		t.Errorf("kept %d bytes of foreign buffers", s.KeptBytes)
	}
	// Nothing kept with a limit of 0.
	p = NewBufferPool(0)
	p.Free(p.Allocate(100))
	if s := p.Stats(); s.KeptBytes != 0 || s.Reused != 0 {
		t.Errorf("a pool of 0 bytes kept %+v", s)
	}
}

// Buffers in use are never handed out twice: goroutines each fill the
// buffers they hold with their own byte and check it is still there
// before freeing them.
func TestBufferPoolConcurrentUse(t *testing.T) {
	p := NewBufferPool(1 << 20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mark := byte(g + 1)
			for i := range 2000 {
				b := p.Allocate(64 + (i%7)*100)
				for j := range b {
					b[j] = mark
				}
				b = p.Reallocate(len(b)+(i%3)*300, b)
				for j, v := range b {
					if v != mark && v != 0 {
						t.Errorf("goroutine %d found byte %d of a buffer it holds changed to %d", g, j, v)
						return
					}
				}
				p.Free(b)
			}
		}()
	}
	wg.Wait()
	if p.Stats().Reused == 0 {
		t.Error("no buffer was reused")
	}
}

// A Store writes many files through its pool, each read back whole and
// equal to its rows: no buffer of one write leaks into another, and a
// checked allocator sees every buffer of the builds given back.
func TestStoreWritesThroughItsPool(t *testing.T) {
	ctx := context.Background()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	s, err := NewStore(b, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	def := &Table{Name: "pooled", Schema: arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil), SortKey: []string{"k"}}
	checked := memory.NewCheckedAllocator(s.Allocator())
	var files []DataFile
	var want []string
	for i := range 12 {
		rb := array.NewRecordBuilder(checked, def.Schema)
		n := 100 + i*997
		for r := range n {
			// Descending keys: Write sorts them, through the pool too.
			rb.Field(0).(*array.Int64Builder).Append(int64(n - r))
			if r%5 == 0 {
				rb.Field(1).(*array.StringBuilder).AppendNull()
			} else {
				rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("file %d row %d", i, n-r))
			}
		}
		rec := rb.NewRecord()
		rb.Release()
		f, err := s.Write(ctx, "p1", def, "all", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		var sb bytes.Buffer
		for k := 1; k <= n; k++ {
			if (n-k)%5 == 0 {
				fmt.Fprintf(&sb, "%d:null\n", k)
			} else {
				fmt.Fprintf(&sb, "%d:file %d row %d\n", k, i, k)
			}
		}
		want = append(want, sb.String())
	}
	checked.AssertSize(t, 0)
	if s.pool.Stats().Reused == 0 {
		t.Error("the store's pool reused no buffer across twelve writes")
	}
	for i, f := range files {
		rec, err := s.readFile(ctx, "p1", f, def.Schema)
		if err != nil {
			t.Fatal(err)
		}
		var sb bytes.Buffer
		ks, ss := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		for r := range int(rec.NumRows()) {
			if ss.IsNull(r) {
				fmt.Fprintf(&sb, "%d:null\n", ks.Value(r))
			} else {
				fmt.Fprintf(&sb, "%d:%s\n", ks.Value(r), ss.Value(r))
			}
		}
		rec.Release()
		if sb.String() != want[i] {
			t.Errorf("file %d read back differs from its rows", i)
		}
	}
}

func TestBufferPoolTakeReusesWithoutZeroing(t *testing.T) {
	p := NewBufferPool(1 << 20)
	if p.take(0) != nil {
		t.Error("take(0) returned a buffer")
	}
	b := p.take(1000)
	if len(b) != 0 || cap(b) < 1000 {
		t.Fatalf("take(1000): len %d cap %d, want 0 and at least 1000", len(b), cap(b))
	}
	b = append(b, "written"...)
	p.Free(b[:cap(b)])
	c := p.take(900)
	if cap(c) != cap(b) || string(c[:7]) != "written" {
		t.Errorf("take after Free: cap %d (want %d), first bytes %q: not the freed buffer as it was", cap(c), cap(b), c[:7])
	}
	if st := p.Stats(); st.Reused != 1 {
		t.Errorf("%d buffers reused, want 1", st.Reused)
	}
}
