package rollups

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
)

// dataLines returns the non-blank, non-comment lines of a testdata file.
func dataLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestNames(t *testing.T) {
	check := map[string]func(string) error{
		"project":    validateProject,
		"partition":  validatePartition,
		"checkpoint": validateCheckpointName,
		"table": func(n string) error {
			return (&Table{Name: n, Schema: pageviewSchema}).Validate()
		},
	}
	for _, line := range dataLines(t, "names.txt") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || check[f[0]] == nil || (f[1] != "ok" && f[1] != "bad") {
			t.Fatalf("names.txt: bad line %q", line)
		}
		name, err := strconv.Unquote(f[2])
		if err != nil {
			t.Fatalf("names.txt: bad line %q: %v", line, err)
		}
		err = check[f[0]](name)
		if (err == nil) != (f[1] == "ok") {
			t.Errorf("%s %q: %v, want %s", f[0], name, err, f[1])
		}
		if err != nil && !errors.Is(err, ErrInvalidName) && !errors.Is(err, ErrInvalidTable) {
			t.Errorf("%s %q: error %v wraps neither ErrInvalidName nor ErrInvalidTable", f[0], name, err)
		}
	}
}

func TestTypes(t *testing.T) {
	for _, line := range dataLines(t, "types.txt") {
		if s, bad := strings.CutPrefix(line, "bad"); bad {
			s = strings.TrimSpace(s)
			if dt, err := parseType(s); err == nil {
				t.Errorf("type %q parsed as %s, want an error", s, dt)
			}
			continue
		}
		dt, err := parseType(line)
		if err != nil {
			t.Errorf("type %q: %v", line, err)
			continue
		}
		if back, err := typeString(dt); err != nil || back != line {
			t.Errorf("type %q prints as %q (%v)", line, back, err)
		}
		// Every supported type can be written, sorted and read back.
		if _, err := comparer(dt); err != nil {
			t.Errorf("type %q: %v", line, err)
		}
	}
	if err := SupportedType(arrow.ListOf(arrow.PrimitiveTypes.Int64)); err == nil {
		t.Error("a list type is supported")
	}
}

// TestManifestGoldenV1: the single-object manifest of format 1
// (testdata/manifest-v1.json), which installations upgrading still hold,
// decodes whole; broken documents are refused.
func TestManifestGoldenV1(t *testing.T) {
	data, err := os.ReadFile("testdata/manifest-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeRoot(data, Live(testProject), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != manifestFormatV1 || m.Version != 2 || m.Checkpoint("processor") != "1043" || len(m.Files("pageviews", "2026-03-28")) != 1 || len(m.Retired) != 1 {
		t.Fatalf("decoded %s", describe(m))
	}
	if !m.Tables["pageviews"].Schema().Equal(pageviewSchema) {
		t.Fatalf("schema %s", m.Tables["pageviews"].Schema())
	}
	f := m.Files("pageviews", "2026-03-29")[0]
	if f.Table != "pageviews" || f.Partition != "2026-03-29" || f.Rows != 12 || string(f.Min) != "1774821600000" {
		t.Fatalf("file %+v", f)
	}
	for _, bad := range []string{`{}`, `{"format":"mf-rollups-manifest/9","project":"` + testProject + `","version":1}`, `not json`,
		`{"format":"mf-rollups-manifest/2","project":"` + testProject + `","version":0,"tables":{}}`,
		`{"format":"mf-rollups-manifest/2","project":"` + testProject + `","version":1,"tables":{"t":{"columns":[],"groups":[{"group":"2026-03","object":"x.json","from":"2026-03-01","to":"2026-03-01","partitions":1}]}}}`,
		`{"format":"mf-rollups-manifest/2","project":"` + testProject + `","version":1,"tables":{"t":{"columns":[],"groups":[{"group":"2026-03","object":"019d38c02b06-0123456789abcdef0125.json","from":"2026-04-01","to":"2026-04-01","partitions":1}]}}}`,
	} {
		if _, err := decodeRoot([]byte(bad), Live(testProject), nil); !errors.Is(err, ErrCorruptManifest) {
			t.Errorf("decode %q: %v, want ErrCorruptManifest", bad, err)
		}
	}
	if _, err := decodeRoot(data, Live("another-project"), nil); !errors.Is(err, ErrCorruptManifest) {
		t.Errorf("manifest of another project: %v, want ErrCorruptManifest", err)
	}
}

// TestManifestGoldenV2: the split manifest of testdata/manifest-v2 (a
// root and its sub-manifests, laid out as under rollups/<project>/) loads
// through a Store and a Reader, and each object encodes back to the same
// document.
func TestManifestGoldenV2(t *testing.T) {
	ctx := t.Context()
	b := apptest.OpenBucket(t, t.TempDir())
	docs := map[string]string{} // object key: document
	root := filepath.Join("testdata", "manifest-v2")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		key := "rollups/" + testProject + "/" + filepath.ToSlash(rel)
		docs[key] = string(data)
		_, err = b.Put(ctx, key, bytes.NewReader(data))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := newStore(t, b, nil).Load(ctx, Live(testProject))
	if err != nil {
		t.Fatal(err)
	}
	sn, err := newReader(t, b, nil).Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pageviews/2026-02-27/019ca1b5e400-5f4e3d2c1b0a99887766.parquet",
		"pageviews/2026-03-28/019d38c02b00-00112233445566778899.parquet",
		"pageviews/2026-03-29/019d38c02b03-33221100ffeeddccbbaa.parquet",
		"people/b00/019d38c02b02-0a1b2c3d4e5f60718293.parquet",
		"people/b00/019d38c02b05-a4b5c6d7e8f901234567.parquet",
		"people/b01/019d38c02b02-1b2c3d4e5f6071829304.parquet",
	}
	for _, got := range []*Manifest{m, sn.Manifest()} {
		if got.Format != manifestFormat || got.Version != 3 || got.Checkpoint("processor") != "1043" || len(got.Retired) != 1 || len(got.retiredParts) != 1 || !slices.Equal(fileKeys(got), want) {
			t.Fatalf("loaded %s, want version 3, files %v", describe(got), want)
		}
	}
	if f := m.Files("people", "b00")[1]; f.Table != "people" || f.Rows != 3 || string(f.Min) != `"1a02"` {
		t.Fatalf("file %+v", f)
	}
	if ts := m.Table("people"); !slices.Equal(ts.Key, []string{"ref"}) || ts.Schema().NumFields() != 4 {
		t.Fatalf("people: key %v schema %s", ts.Key, ts.Schema())
	}
	if st := sn.r.Stats(); st.SubManifestGets != 3 {
		t.Fatalf("the reader fetched %d sub-manifests, want 3", st.SubManifestGets)
	}
	indent := func(data []byte) string {
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	enc, err := encodeRoot(m)
	if err != nil {
		t.Fatal(err)
	}
	key := "rollups/" + testProject + "/manifest.json"
	if got, want := indent(enc), strings.TrimSpace(docs[key]); got != want {
		t.Fatalf("re-encoded root differs:\n%s\nwant\n%s", got, want)
	}
	for name, ts := range m.Tables {
		for g, parts := range groupPartitions(ts, nil) {
			enc, ref, err := encodeParts(m.Project, name, ts, g, parts)
			if err != nil {
				t.Fatal(err)
			}
			ref.Object = ts.groups[g].Object
			if ref != ts.groups[g] {
				t.Errorf("table %s group %s: encoded as %+v, the root says %+v", name, g, ref, ts.groups[g])
			}
			key := "rollups/" + testProject + "/manifests/" + name + "/" + ref.Object
			if got, want := indent(enc), strings.TrimSpace(docs[key]); got != want {
				t.Errorf("re-encoded sub-manifest %s differs:\n%s\nwant\n%s", key, got, want)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultReaderConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.Prefix, bad.RowGroupRows, bad.CompactMinFiles = "rollups/", 10, 1
	err := bad.Validate()
	for _, want := range []string{"Prefix", "RowGroupRows", "CompactMinFiles"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate of a bad %s: %v", want, err)
		}
	}
	badR := DefaultReaderConfig()
	badR.Parallelism, badR.CacheBytes = 0, -1
	if err := badR.Validate(); err == nil || !strings.Contains(err.Error(), "Parallelism") || !strings.Contains(err.Error(), "CacheBytes") {
		t.Errorf("ReaderConfig.Validate: %v", err)
	}
}

// TestSchemaEvolution: files written before a column existed read as
// nulls in it; a column whose type changed is refused.
func TestSchemaEvolution(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	s := newStore(t, b, nil)
	v1 := &Table{Name: "counts", Schema: arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	}, nil), SortKey: []string{"key"}}
	v2 := &Table{Name: "counts", Schema: arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "sum", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil), SortKey: []string{"key"}}
	rec := func(tbl *Table, keys ...string) arrow.Record {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, tbl.Schema)
		defer bld.Release()
		for i, k := range keys {
			bld.Field(0).(*array.StringBuilder).Append(k)
			bld.Field(1).(*array.Int64Builder).Append(int64(i))
			if tbl.Schema.NumFields() > 2 {
				bld.Field(2).(*array.Float64Builder).Append(float64(i) + 0.5)
			}
		}
		return bld.NewRecord()
	}
	r1, r2 := rec(v1, "b", "a"), rec(v2, "c", "d")
	defer r1.Release()
	defer r2.Release()
	f1, err := s.Write(ctx, testProject, v1, "all", r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, testProject, v2, "all", r1); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("write of a record of another schema: %v, want ErrSchemaMismatch", err)
	}
	f2, err := s.Write(ctx, testProject, v2, "all", r2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, Live(testProject), 0, Change{Add: []DataFile{f1, f2}}); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, b, nil)
	sn, err := r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = sn.Scan(ctx, "counts", ScanOptions{Columns: []string{"key", "sum"}}, func(bt Batch) error {
		keys, sums := bt.Record.Column(0).(*array.String), bt.Record.Column(1).(*array.Float64)
		for i := range keys.Len() {
			s := "null"
			if sums.IsValid(i) {
				s = strconv.FormatFloat(sums.Value(i), 'g', -1, 64)
			}
			got = append(got, keys.Value(i)+"="+s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a=null b=null c=0.5 d=1.5"; strings.Join(got, " ") != want {
		t.Fatalf("scan across schema versions: %v, want %s", got, want)
	}
	// A string partition label and a key range on a string key.
	got = got[:0]
	err = sn.Scan(ctx, "counts", ScanOptions{Partitions: []string{"all"}, KeyMin: "b", KeyMax: "c"}, func(bt Batch) error {
		for i := range bt.Record.NumRows() {
			got = append(got, bt.Record.Column(0).(*array.String).Value(int(i)))
		}
		return nil
	})
	if err != nil || strings.Join(got, " ") != "b c" {
		t.Fatalf("key range b..c: %v, %v", got, err)
	}
	// Changing a column's type breaks reading the old files.
	v3 := &Table{Name: "counts", Schema: arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Float64},
	}, nil)}
	r3 := array.NewRecordBuilder(memory.DefaultAllocator, v3.Schema)
	r3.Field(0).(*array.StringBuilder).Append("e")
	r3.Field(1).(*array.Float64Builder).Append(1)
	rec3 := r3.NewRecord()
	r3.Release()
	defer rec3.Release()
	f3, err := s.Write(ctx, testProject, v3, "all", rec3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, Live(testProject), 1, Change{Add: []DataFile{f3}}); err != nil {
		t.Fatal(err)
	}
	sn, err = r.Refresh(ctx, testProject)
	if err != nil {
		t.Fatal(err)
	}
	err = sn.Scan(ctx, "counts", ScanOptions{Columns: []string{"n"}}, func(Batch) error { return nil })
	if !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("scan after a type change: %v, want ErrSchemaMismatch", err)
	}
}
