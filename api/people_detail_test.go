package api

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
)

// TestPersonDetails checks the detail rows read per page (people_detail.go)
// on the tables the real processor wrote from testdata/report/batches.json:
// the people of testdata/report/person-details.json have the details
// worked out by hand; every person's details equal their row decoded from
// one scan of the whole people table (asked for in any order, several
// buckets at once, and once more through a cache too small to keep any
// bucket, which must still answer and stay within its budget); after a
// commit that rewrites a bucket, the new snapshot's details replace the
// old ones in the cache.
func TestPersonDetails(t *testing.T) {
	env := newReportFixture(t)
	ctx := context.Background()
	d := env.projectData(t, shopID)

	raw, err := os.ReadFile("testdata/report/person-details.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		People []struct {
			User, Browser, UserID, Name, Email string
			HasName, HasEmail                  bool
			Visits                             int64
			Traits                             []string
			Revenue                            int
		}
		Later struct {
			Key, Name string
			Body      json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, c := range file.People {
		r, who := UserRef(shopID, c.User), c.User
		if c.Browser != "" {
			r, who = BrowserRef(shopID, c.Browser), c.Browser
		}
		idx, ok := d.Person(r)
		if !ok {
			t.Errorf("%s is not a person", who)
			continue
		}
		pd, err := d.detail(ctx, idx)
		if err != nil {
			t.Fatal(err)
		}
		traits := []string{}
		if pd.Traits != "" {
			var m map[string]any
			if err := json.Unmarshal([]byte(pd.Traits), &m); err != nil {
				t.Errorf("%s: traits %q: %v", who, pd.Traits, err)
			}
			for k := range m {
				traits = append(traits, k)
			}
			slices.Sort(traits)
		}
		if pd.UserID != c.UserID || pd.Name != c.Name || pd.HasName != c.HasName || pd.Email != c.Email ||
			pd.HasEmail != c.HasEmail || pd.Visits != c.Visits || !slices.Equal(traits, c.Traits) || len(pd.Revenue) != c.Revenue {
			t.Errorf("%s: details %+v (traits %v), want %+v", who, *pd, traits, c)
		}
	}

	// Every person, against one scan of the whole table.
	want := map[ref]personDetail{}
	err = d.snap.Scan(ctx, tables.People, rollups.ScanOptions{Columns: detailColumns}, func(b rollups.Batch) error {
		return wholeDetails(want, b.Record)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(d.People) || len(d.peopleParts) < 2 {
		t.Fatalf("%d people in the table, %d in the index, %d partitions", len(want), len(d.People), len(d.peopleParts))
	}
	idx := make([]int32, len(d.People))
	for i := range idx {
		idx[i] = int32(len(idx) - 1 - i)
	}
	check := func(name string, d *projectData) {
		t.Helper()
		got, err := d.details(ctx, idx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(idx) {
			t.Fatalf("%s: %d details for %d people", name, len(got), len(idx))
		}
		for _, i := range idx {
			p := &d.People[i]
			if w := want[p.Ref]; !reflect.DeepEqual(*got[i], w) {
				t.Errorf("%s: person %x: details %+v, want %+v", name, p.Ref, *got[i], w)
			}
		}
	}
	check("default cache", d)
	check("default cache, again", d) // from the cached chunks

	small := *d
	small.rows, small.req = newRowCache(64), &pins{}
	check("64-byte cache", &small)
	if st := small.rows.stats(); st.Bytes > st.Limit || st.Entries != 0 {
		t.Errorf("64-byte cache holds %d bytes in %d entries", st.Bytes, st.Entries)
	}

	// A commit that rewrites people: the new snapshot's details, and no
	// more than one details entry per bucket left in the cache.
	env.send(t, file.Later.Key, string(file.Later.Body))
	env.wait(t)
	d2 := env.projectData(t, shopID)
	if d2.Version == d.Version {
		t.Fatal("the batch made no new snapshot")
	}
	alice, _ := d2.Person(UserRef(shopID, "alice"))
	all := make([]int32, len(d2.People))
	for i := range all {
		all[i] = int32(i)
	}
	got, err := d2.details(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if got[alice].Name != file.Later.Name {
		t.Errorf("alice's name after the commit: %q, want %q", got[alice].Name, file.Later.Name)
	}
	perBucket := map[string]int{}
	d2.rows.mu.Lock()
	for key := range d2.rows.items {
		if i := strings.Index(key, tables.People+"-detail/"); i >= 0 {
			perBucket[strings.SplitN(key[i:], "\x00", 2)[0]]++
		}
	}
	d2.rows.mu.Unlock()
	if len(perBucket) == 0 {
		t.Error("no details in the cache")
	}
	for b, n := range perBucket {
		if n > 1 {
			t.Errorf("%d details entries of %s in the cache, want the newest only", n, b)
		}
	}
}

// wholeDetails decodes the detail columns of a scan of the people table
// row by row into want: the expected answer, built without the chunks.
func wholeDetails(want map[ref]personDetail, rec arrow.Record) error {
	c, err := tables.ColumnsOf(rec, detailColumns)
	if err != nil {
		return err
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		pd := personDetail{UserID: tables.StrAt(c[1], i), Name: tables.StrAt(c[2], i), HasName: !c[2].IsNull(i),
			Email: tables.StrAt(c[3], i), HasEmail: !c[3].IsNull(i), LastPath: tables.StrAt(c[9], i),
			Traits: tables.StrAt(c[10], i), SharedBrowser: tables.BoolAt(c[12], i), Revenue: []Money{}}
		pd.Visits, _ = tables.Int64At(c[4], i)
		pd.ActiveDays, _ = tables.Int64At(c[5], i)
		pd.Events, _ = tables.Int64At(c[6], i)
		pd.Pageviews, _ = tables.Int64At(c[7], i)
		pd.Browsers, _ = tables.Int64At(c[11], i)
		if s := tables.StrAt(c[8], i); s != "" {
			if err := json.Unmarshal([]byte(s), &pd.Revenue); err != nil {
				return err
			}
		}
		want[tables.RefAt(c[0], i)] = pd
	}
	return nil
}
