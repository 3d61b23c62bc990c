package rollups

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/mfhq/mf/internal/apptest"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/storagetest"
)

// The test table: a pageview-like event table.
var pageviewSchema = arrow.NewSchema([]arrow.Field{
	{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	{Name: "event_id", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}},
	{Name: "visit_id", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Nullable: true},
	{Name: "person", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Nullable: true},
	{Name: "path", Type: arrow.BinaryTypes.String},
	{Name: "referrer", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "country", Type: arrow.BinaryTypes.String},
	{Name: "device", Type: arrow.BinaryTypes.String},
	{Name: "browser", Type: arrow.BinaryTypes.String},
	{Name: "channel", Type: arrow.BinaryTypes.String},
	{Name: "duration_ms", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "revenue_cents", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "consented", Type: arrow.FixedWidthTypes.Boolean},
}, nil)

func pageviewTable() *Table {
	return &Table{
		Name:         "pageviews",
		Schema:       pageviewSchema,
		SortKey:      []string{"time", "event_id"},
		NoDictionary: []string{"time", "event_id"},
	}
}

// pageview is one row of the test table, as in testdata/pageviews.jsonl.
type pageview struct {
	Time         int64   `json:"time"` // Unix ms
	EventID      string  `json:"event_id"`
	VisitID      *string `json:"visit_id"`
	Person       *string `json:"person"`
	Path         string  `json:"path"`
	Referrer     *string `json:"referrer"`
	Country      string  `json:"country"`
	Device       string  `json:"device"`
	Browser      string  `json:"browser"`
	Channel      string  `json:"channel"`
	DurationMS   *int32  `json:"duration_ms"`
	RevenueCents *int64  `json:"revenue_cents"`
	Consented    bool    `json:"consented"`
}

func (p pageview) less(q pageview) int {
	return cmp.Or(cmp.Compare(p.Time, q.Time), cmp.Compare(p.EventID, q.EventID))
}

// uuidBytes turns a UUID in hex (dashes allowed) into 16 bytes.
func uuidBytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		t.Fatalf("bad UUID %q", s)
	}
	return b
}

func uuidString(b []byte) string { return hex.EncodeToString(b) }

// normalize writes UUIDs as 32 lower-case hex digits.
func (p pageview) normalize(t testing.TB) pageview {
	p.EventID = uuidString(uuidBytes(t, p.EventID))
	for _, s := range []**string{&p.VisitID, &p.Person} {
		if *s != nil {
			v := uuidString(uuidBytes(t, **s))
			*s = &v
		}
	}
	return p
}

// pageviewRecord builds a record of the test table from rows.
func pageviewRecord(t testing.TB, rows []pageview) arrow.Record {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, pageviewSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Time))
		b.Field(1).(*array.FixedSizeBinaryBuilder).Append(uuidBytes(t, r.EventID))
		for i, s := range []*string{r.VisitID, r.Person} {
			fb := b.Field(2 + i).(*array.FixedSizeBinaryBuilder)
			if s == nil {
				fb.AppendNull()
			} else {
				fb.Append(uuidBytes(t, *s))
			}
		}
		b.Field(4).(*array.StringBuilder).Append(r.Path)
		if r.Referrer == nil {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append(*r.Referrer)
		}
		b.Field(6).(*array.StringBuilder).Append(r.Country)
		b.Field(7).(*array.StringBuilder).Append(r.Device)
		b.Field(8).(*array.StringBuilder).Append(r.Browser)
		b.Field(9).(*array.StringBuilder).Append(r.Channel)
		if r.DurationMS == nil {
			b.Field(10).AppendNull()
		} else {
			b.Field(10).(*array.Int32Builder).Append(*r.DurationMS)
		}
		if r.RevenueCents == nil {
			b.Field(11).AppendNull()
		} else {
			b.Field(11).(*array.Int64Builder).Append(*r.RevenueCents)
		}
		b.Field(12).(*array.BooleanBuilder).Append(r.Consented)
	}
	return b.NewRecord()
}

// pageviewRows reads rows of the test table (all columns) from a record.
func pageviewRows(t testing.TB, rec arrow.Record) []pageview {
	t.Helper()
	if !rec.Schema().Equal(pageviewSchema) {
		t.Fatalf("record schema %s, want the pageview schema", rec.Schema())
	}
	col := func(i int) arrow.Array { return rec.Column(i) }
	out := make([]pageview, rec.NumRows())
	for i := range out {
		p := &out[i]
		p.Time = int64(col(0).(*array.Timestamp).Value(i))
		p.EventID = uuidString(col(1).(*array.FixedSizeBinary).Value(i))
		for j, dst := range []**string{&p.VisitID, &p.Person} {
			if a := col(2 + j).(*array.FixedSizeBinary); a.IsValid(i) {
				v := uuidString(a.Value(i))
				*dst = &v
			}
		}
		p.Path = col(4).(*array.String).Value(i)
		if a := col(5).(*array.String); a.IsValid(i) {
			v := a.Value(i)
			p.Referrer = &v
		}
		p.Country = col(6).(*array.String).Value(i)
		p.Device = col(7).(*array.String).Value(i)
		p.Browser = col(8).(*array.String).Value(i)
		p.Channel = col(9).(*array.String).Value(i)
		if a := col(10).(*array.Int32); a.IsValid(i) {
			v := a.Value(i)
			p.DurationMS = &v
		}
		if a := col(11).(*array.Int64); a.IsValid(i) {
			v := a.Value(i)
			p.RevenueCents = &v
		}
		p.Consented = col(12).(*array.Boolean).Value(i)
	}
	return out
}

// readPageviews reads testdata/pageviews.jsonl.
func readPageviews(t testing.TB) []pageview {
	t.Helper()
	data, err := os.ReadFile("testdata/pageviews.jsonl")
	if err != nil {
		t.Fatalf("cannot read test rows: %v", err)
	}
	var rows []pageview
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var p pageview
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("testdata/pageviews.jsonl line %d: %v", n, err)
		}
		rows = append(rows, p.normalize(t))
	}
	if len(rows) == 0 {
		t.Fatal("testdata/pageviews.jsonl holds no rows")
	}
	return rows
}

// genPageviews makes n pseudo-random rows on day (UTC), in random order,
// from seed.
func genPageviews(seed uint64, day time.Time, n int) []pageview {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	paths := []string{"/", "/pricing", "/blog/arrow-and-parquet", "/docs/getting-started", "/shop/cart", "/shop/checkout", "/about"}
	countries := []string{"DE", "US", "FR", "GB", "CH", "NL"}
	devices := []string{"desktop", "mobile", "tablet"}
	browsers := []string{"Chrome", "Firefox", "Safari", "Edge"}
	channels := []string{"direct", "organic_search", "referral", "paid_search", "email"}
	uuid := func() string {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return hex.EncodeToString(b[:])
	}
	rows := make([]pageview, n)
	var visit, person *string
	for i := range rows {
		if visit == nil || rng.IntN(4) == 0 {
			v := uuid()
			visit = &v
			if rng.IntN(3) > 0 {
				p := uuid()
				person = &p
			} else {
				person = nil
			}
		}
		r := pageview{
			Time:      day.UnixMilli() + rng.Int64N(24*3600*1000),
			EventID:   uuid(),
			VisitID:   visit,
			Person:    person,
			Path:      paths[rng.IntN(len(paths))],
			Country:   countries[rng.IntN(len(countries))],
			Device:    devices[rng.IntN(len(devices))],
			Browser:   browsers[rng.IntN(len(browsers))],
			Channel:   channels[rng.IntN(len(channels))],
			Consented: person != nil,
		}
		if rng.IntN(2) == 0 {
			ref := "news.example"
			r.Referrer = &ref
		}
		if rng.IntN(3) == 0 {
			d := int32(rng.IntN(600000))
			r.DurationMS = &d
		}
		if rng.IntN(50) == 0 {
			c := int64(rng.IntN(100000))
			r.RevenueCents = &c
		}
		rows[i] = r
	}
	return rows
}

// backend is an object store the tests run on.
type backend struct {
	name string
	// open returns a fresh, empty bucket closed when t ends.
	open func(t *testing.T) storage.Bucket
}

// backends returns the local directory and (started once for the caller
// t) a real MinIO.
func backends(t *testing.T) []backend {
	local := backend{name: "local", open: func(t *testing.T) storage.Bucket {
		return apptest.OpenBucket(t, t.TempDir())
	}}
	var minioURL string
	minio := backend{name: "minio", open: func(t *testing.T) storage.Bucket {
		if minioURL == "" {
			t.Fatal("MinIO not started")
		}
		return openBucket(t, storage.Config{Store: storagetest.FreshBucket(t, minioURL)})
	}}
	minioURL = storagetest.StartMinIO(t)
	return []backend{local, minio}
}

func openBucket(t *testing.T, cfg storage.Config) storage.Bucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := storage.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("cannot open bucket: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newStore(t *testing.T, b storage.Bucket, edit func(*Config)) *Store {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	s, err := NewStore(b, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newReader(t *testing.T, b storage.BucketReader, edit func(*ReaderConfig)) *Reader {
	t.Helper()
	cfg := DefaultReaderConfig()
	if edit != nil {
		edit(&cfg)
	}
	r, err := NewReader(b, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeRows writes rows as one data file or fails the test.
func writeRows(t *testing.T, s *Store, project, partition string, rows []pageview) DataFile {
	t.Helper()
	rec := pageviewRecord(t, rows)
	defer rec.Release()
	f, err := s.Write(t.Context(), project, pageviewTable(), partition, rec)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return f
}

// scanRows reads every row of the pageviews table through sn.
func scanRows(t *testing.T, sn *Snapshot, opts ScanOptions) []pageview {
	t.Helper()
	var out []pageview
	err := sn.Scan(t.Context(), "pageviews", opts, func(b Batch) error {
		out = append(out, pageviewRows(t, b.Record)...)
		return nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

// sameRows fails the test unless got and want hold the same rows in any
// order.
func sameRows(t *testing.T, what string, got, want []pageview) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.SortFunc(g, pageview.less)
	slices.SortFunc(w, pageview.less)
	if len(g) != len(w) {
		t.Fatalf("%s: %d rows, want %d", what, len(g), len(w))
	}
	for i := range g {
		gj, _ := json.Marshal(g[i])
		wj, _ := json.Marshal(w[i])
		if !bytes.Equal(gj, wj) {
			t.Fatalf("%s: row %d is\n%s\nwant\n%s", what, i, gj, wj)
		}
	}
}

func mustUTCDay(t testing.TB, s string) time.Time {
	t.Helper()
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func fileKeys(m *Manifest) []string {
	var keys []string
	m.liveFiles(func(f DataFile) { keys = append(keys, f.Ref().String()) })
	slices.Sort(keys)
	return keys
}

func describe(m *Manifest) string {
	return fmt.Sprintf("version %d generation %d files %v checkpoints %v", m.Version, m.Generation, fileKeys(m), m.Checkpoints)
}
