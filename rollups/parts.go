package rollups

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A manifest of format 2 is split (docs/rollups.md "Manifest"): the root
// object (manifest.json, or a staged generation's) holds the head, the
// tables' definitions and, per table, a list of partition groups; each
// group's live files are in a sub-manifest object of its own under
// manifests/<table>/<object id>.json. A group is a month of day partitions
// (YYYY-MM) or all label partitions of a table ("labels"). Sub-manifests
// are immutable and named by a new id each time they are written, so a
// commit writes only the groups it changed and the root, and a reader
// that knows an object id never fetches it again.

// partsFormat names the sub-manifest encoding; a reader refuses others.
const partsFormat = "mf-rollups-partitions/1"

// labelGroup is the group of a table's label (non-day) partitions.
const labelGroup = "labels"

// groupOf returns the group of a (valid) partition: the month of a day,
// or labelGroup.
func groupOf(partition string) string {
	if partition != "" && partition[0] >= '0' && partition[0] <= '9' {
		return partition[:7]
	}
	return labelGroup
}

// validGroup reports whether id is a group id: a month YYYY-MM or
// labelGroup.
func validGroup(id string) bool {
	if id == labelGroup {
		return true
	}
	t, err := time.Parse("2006-01", id)
	return err == nil && t.Format("2006-01") == id
}

// partGroup is a root's reference to one sub-manifest.
type partGroup struct {
	// ID is the group: "YYYY-MM" or "labels".
	ID string `json:"group"`
	// Object is the sub-manifest's object name: a unique id and ".json".
	Object string `json:"object"`
	// From and To are the group's least and greatest partitions.
	From string `json:"from"`
	To   string `json:"to"`
	// Partitions, Files, Rows and Bytes count the group's partitions and
	// live files and sum the files' rows and sizes.
	Partitions int   `json:"partitions"`
	Files      int   `json:"files"`
	Rows       int64 `json:"rows"`
	Bytes      int64 `json:"bytes"`
}

// partsHead is the encoding of a sub-manifest without its partitions.
type partsHead struct {
	Format  string `json:"format"`
	Project string `json:"project"`
	Table   string `json:"table"`
	Group   string `json:"group"`
}

// partsJSON is the encoding of a sub-manifest.
type partsJSON struct {
	partsHead
	Partitions map[string]json.RawMessage `json:"partitions"`
}

// groupPartitions returns the partitions of ts by group, ascending, for
// the groups want selects (nil: all); groups without partitions are left
// out.
func groupPartitions(ts *TableState, want map[string]bool) map[string][]string {
	out := map[string][]string{}
	if want != nil {
		for g := range want {
			if ps := partitionsOf(ts, g); len(ps) > 0 {
				out[g] = ps
			}
		}
		return out
	}
	for p := range ts.Partitions {
		g := groupOf(p)
		out[g] = append(out[g], p)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// partitionsOf returns the partitions of ts in group g, ascending: the
// days of the month of g that it holds, or its labels.
func partitionsOf(ts *TableState, g string) []string {
	var out []string
	if g == labelGroup {
		for p := range ts.Partitions {
			if groupOf(p) == g {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
	first, err := time.Parse("2006-01", g)
	if err != nil {
		return nil
	}
	for d := first; d.Format("2006-01") == g; d = d.AddDate(0, 0, 1) {
		p := d.Format(time.DateOnly)
		if _, ok := ts.Partitions[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// encodeParts writes the sub-manifest of group g of table name (its
// partitions parts, ascending) as compact JSON on one line, and returns
// the group's reference without its object name.
func encodeParts(project, name string, ts *TableState, g string, parts []string) ([]byte, partGroup, error) {
	head, err := json.Marshal(partsHead{Format: partsFormat, Project: project, Table: name, Group: g})
	if err != nil {
		return nil, partGroup{}, fmt.Errorf("cannot encode partitions %s of table %q: %w", g, name, err)
	}
	ref := partGroup{ID: g, From: parts[0], To: parts[len(parts)-1], Partitions: len(parts)}
	var buf bytes.Buffer
	buf.Grow(len(head) + 256*len(parts))
	buf.Write(head[:len(head)-1])
	buf.WriteString(`,"partitions":{`)
	for i, p := range parts {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(p)
		buf.Write(k)
		buf.WriteByte(':')
		files := ts.Partitions[p]
		for _, f := range files {
			ref.Files++
			ref.Rows += f.Rows
			ref.Bytes += f.Bytes
		}
		if e, ok := ts.enc[p]; ok {
			buf.Write(e)
			continue
		}
		e, err := json.Marshal(files)
		if err != nil {
			return nil, partGroup{}, fmt.Errorf("cannot encode partition %q of table %q: %w", p, name, err)
		}
		buf.Write(e)
	}
	buf.WriteString("}}\n")
	return buf.Bytes(), ref, nil
}

// decodeParts reads and checks the sub-manifest that ref of table name
// of project points at, and returns its partitions' files and encodings.
func decodeParts(data []byte, project, name string, ref partGroup) (map[string][]DataFile, map[string][]byte, error) {
	var in partsJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	if in.Format != partsFormat {
		return nil, nil, fmt.Errorf("%w: format %q, want %q (written by another version of mf?)", ErrCorruptManifest, in.Format, partsFormat)
	}
	if in.Project != project || in.Table != name || in.Group != ref.ID {
		return nil, nil, fmt.Errorf("%w: it holds project %q table %q group %q, not %q %q %q", ErrCorruptManifest, in.Project, in.Table, in.Group, project, name, ref.ID)
	}
	if len(in.Partitions) != ref.Partitions {
		return nil, nil, fmt.Errorf("%w: %d partitions, the root says %d", ErrCorruptManifest, len(in.Partitions), ref.Partitions)
	}
	files := make(map[string][]DataFile, len(in.Partitions))
	enc := make(map[string][]byte, len(in.Partitions))
	count := 0
	for p, raw := range in.Partitions {
		if err := validatePartition(p); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
		}
		if groupOf(p) != ref.ID || p < ref.From || p > ref.To {
			return nil, nil, fmt.Errorf("%w: partition %q is outside group %s [%s, %s]", ErrCorruptManifest, p, ref.ID, ref.From, ref.To)
		}
		var fs []DataFile
		if err := json.Unmarshal(raw, &fs); err != nil {
			return nil, nil, fmt.Errorf("%w: partition %q: %w", ErrCorruptManifest, p, err)
		}
		for i := range fs {
			if !validFileName(fs[i].Name) {
				return nil, nil, fmt.Errorf("%w: partition %q: bad file name %q", ErrCorruptManifest, p, fs[i].Name)
			}
			fs[i].Table, fs[i].Partition = name, p
		}
		files[p], enc[p] = fs, raw
		count += len(fs)
	}
	if count != ref.Files {
		return nil, nil, fmt.Errorf("%w: %d files, the root says %d", ErrCorruptManifest, count, ref.Files)
	}
	return files, enc, nil
}

// validPartsObject reports whether n is a sub-manifest object name.
func validPartsObject(n string) bool {
	id, ok := strings.CutSuffix(n, manifestExt)
	return ok && fileIDRE.MatchString(id)
}

// sortedGroups returns the groups of ts ordered by id.
func (t *TableState) sortedGroups() []partGroup {
	out := make([]partGroup, 0, len(t.groups))
	for _, id := range slices.Sorted(maps.Keys(t.groups)) {
		out = append(out, t.groups[id])
	}
	return out
}
