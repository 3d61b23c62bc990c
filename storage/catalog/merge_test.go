package catalog

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
)

var hashPlaceholder = regexp.MustCompile(`\{hash:([^}]+)\}`)

func TestMergeCases(t *testing.T) {
	var cases []struct {
		About   string   `json:"about"`
		State   []string `json:"state"`
		Apply   string   `json:"apply"`
		Changes []string `json:"changes"`
	}
	if err := json.Unmarshal(readTestdata(t, "merge/cases.json"), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.About, func(t *testing.T) {
			st := stateOf(t, c.State...)
			_, plan, err := planLocal(st, readTestdata(t, c.Apply))
			if err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(c.Changes))
			for i, ch := range c.Changes {
				want[i] = hashPlaceholder.ReplaceAllStringFunc(ch, func(m string) string {
					return HashToken(hashPlaceholder.FindStringSubmatch(m)[1])[:12] + "…"
				})
			}
			if got := plan.Describe(); !slices.Equal(got, want) {
				t.Errorf("changes:\ngot  %q\nwant %q", got, want)
			}
		})
	}
}

// What an upsert keeps and what it replaces, entity by entity.
func TestUpsertMerge(t *testing.T) {
	const (
		shop    = "20000000-0000-4000-8000-000000000001"
		website = "30000000-0000-4000-8000-000000000001"
		ada     = "70000000-0000-4000-8000-000000000001"
		seg1    = "60000000-0000-4000-8000-000000000001"
		seg5    = "60000000-0000-4000-8000-000000000005"
		adaKey1 = "mf_pat_ada00001_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
		adaKey2 = "mf_pat_ada00002_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"
	)
	before := stateOf(t, "valid/full.json")
	after, _, err := planLocal(before, readTestdata(t, "merge/update.json"))
	if err != nil {
		t.Fatal(err)
	}

	if _, ok := after.SourceByKey("mf_shopweb1_Website-Key_1"); ok {
		t.Error("the replaced website key still finds its source")
	}
	if src, ok := after.SourceByKey("mf_shopweb1_Website-Key_2"); !ok || src.ID != website || len(src.AllowedOrigins) != 1 {
		t.Errorf("the new website key finds %+v", src)
	}
	if src, ok := after.SourceByKey("mf_shopsrv1_S3cret-Server-Key_xyzXYZ0123456789"); !ok || src.Kind != KindServer {
		t.Error("a source the file does not name is gone")
	}

	if k, u, ok := after.APIKey(adaKey1); !ok || u.ID != ada || !k.Revoked {
		t.Errorf("named API key: %+v %+v %v, want revoked", k, u, ok)
	}
	if k, _, ok := after.APIKey(adaKey2); !ok || !k.Revoked || k.ExpiresAt == nil {
		t.Errorf("unnamed API key changed: %+v %v", k, ok)
	}
	if orgs := after.UserOrganizations("70000000-0000-4000-8000-000000000003"); len(orgs) != 1 || orgs[0].Slug != "gamma" {
		t.Errorf("user organizations: %v", orgs)
	}

	old1, _ := before.Segment(seg1)
	new1, _ := after.Segment(seg1)
	if new1.Ref != old1.Ref || len(new1.Filters) != 1 {
		t.Errorf("updated segment: ref %q (was %q), %d filters", new1.Ref, old1.Ref, len(new1.Filters))
	}
	new5, _ := after.Segment(seg5)
	for _, s := range after.Segments(shop) {
		if s.ID != seg5 && s.Ref == new5.Ref {
			t.Errorf("new segment got the ref of %s", s.ID)
		}
	}
	if got, ok := after.SegmentByRef(shop, new5.Ref); !ok || got.ID != seg5 {
		t.Error("new segment not found by its ref")
	}

	oldDark, _ := before.Flag(shop, "dark-mode")
	newDark, _ := after.Flag(shop, "dark-mode")
	if newDark.Seed != oldDark.Seed || newDark.Default != "on" {
		t.Errorf("dark-mode: seed %q (was %q), d %q", newDark.Seed, oldDark.Seed, newDark.Default)
	}
	if f, _ := after.Flag(shop, "new-checkout"); f.Seed != "newseed00002" {
		t.Errorf("a seed given by the file is not taken: %q", f.Seed)
	}
	oldNoSeed, _ := before.Flag(shop, "no-seed")
	if f, ok := after.Flag(shop, "no-seed"); !ok || f != oldNoSeed {
		t.Error("a flag the file does not name changed")
	}
	if len(after.Actions(shop)) != 4 || len(after.Funnels(shop)) != 3 || len(after.Flags(shop)) != 5 {
		t.Error("entities the file does not name are gone")
	}
	providers := after.Providers(shop)
	if len(providers) != 4 || providers[0].Name != "ads_platform_a" || providers[0].State != "importing" {
		t.Errorf("providers: %+v", providers[0])
	}
}

// Seeds are 12 characters [a-z0-9] and differ between flags; refs are 8.
func TestGeneratedSeeds(t *testing.T) {
	seeds := map[string]bool{}
	st := stateOf(t, "valid/full.json")
	for _, o := range st.Organizations() {
		for _, p := range st.Projects(o.ID) {
			for _, f := range st.Flags(p.ID) {
				if !reSeed.MatchString(f.Seed) {
					t.Errorf("flag %s has seed %q", f.Key, f.Seed)
				}
				if seeds[f.Seed] {
					t.Errorf("seed %q given twice", f.Seed)
				}
				seeds[f.Seed] = true
			}
			for _, s := range st.Segments(p.ID) {
				if !regexp.MustCompile(`^[a-z0-9]{8}$`).MatchString(s.Ref) {
					t.Errorf("segment %s has ref %q", s.ID, s.Ref)
				}
			}
		}
	}
}
