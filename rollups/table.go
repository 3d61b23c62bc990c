package rollups

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
)

// Table defines a table: a name, a flat Arrow schema and the columns its
// rows are sorted by inside every data file. Tables are defined by their
// writers (the processor); the manifest records the latest definition, so
// readers need only the name.
type Table struct {
	// Name is 1 to 64 characters: a lower-case letter, then lower-case
	// letters, digits and '_'.
	Name string
	// Schema is flat: every field is of a type SupportedType accepts.
	Schema *arrow.Schema
	// SortKey names the columns (in order of precedence, ascending, nulls
	// first) that rows are sorted by in every data file. Write sorts the
	// rows, compaction keeps the order while merging, and scans with a
	// KeyRange prune files and rows by the first column. Empty: files keep
	// the order rows were written in and compaction appends them.
	SortKey []string
	// NoDictionary names columns written without dictionary encoding:
	// columns of mostly distinct values (event ids), where a dictionary only
	// adds bytes. Every other column is dictionary encoded, falling back to
	// plain encoding when the dictionary grows large.
	NoDictionary []string
	// Key, when set, makes the table keyed (an upsert table): a row stands
	// for its key (the values of these columns) and replaces every row of
	// the key written before it. Keyed tables have the columns "rev"
	// (int64) and "deleted" (bool): within a partition, the row of a key
	// with the highest rev is the key's row, and a deleted row removes
	// the key. Writers add files of changed rows to a partition instead of
	// rewriting it, with one row per key in a file and revs higher than
	// every rev already in the partition (a counter that grows with each
	// commit): compaction, which merges a partition's files into one
	// without the deleted rows, relies on it. Scan merges them. Rows with
	// no rev (files written before the column) have rev 0, and none is
	// deleted. docs/rollups.md, "Keyed tables".
	Key []string
	// RowGroupRows, when set, is the most rows in one row group of the
	// table's files instead of the store's (Config.RowGroupRows): smaller
	// groups let a key range on the sort key read fewer rows.
	RowGroupRows int64
}

// Columns of keyed tables.
const (
	RevColumn     = "rev"
	DeletedColumn = "deleted"
)

var tableNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Validate reports whether t is usable: a valid name, a flat schema of
// supported types with unique field names, and sort key and dictionary
// columns that exist.
func (t *Table) Validate() error {
	if t == nil {
		return fmt.Errorf("%w: no table", ErrInvalidTable)
	}
	if !tableNameRE.MatchString(t.Name) {
		return fmt.Errorf("%w: name %q must be a lower-case letter then up to 63 lower-case letters, digits or '_'", ErrInvalidTable, t.Name)
	}
	if t.Schema == nil || t.Schema.NumFields() == 0 {
		return fmt.Errorf("%w: table %q has no columns", ErrInvalidTable, t.Name)
	}
	seen := map[string]bool{}
	for _, f := range t.Schema.Fields() {
		if f.Name == "" || seen[f.Name] {
			return fmt.Errorf("%w: table %q has an empty or repeated column name %q", ErrInvalidTable, t.Name, f.Name)
		}
		seen[f.Name] = true
		if err := SupportedType(f.Type); err != nil {
			return fmt.Errorf("%w: table %q column %q: %w", ErrInvalidTable, t.Name, f.Name, err)
		}
	}
	for i, c := range t.SortKey {
		idx := t.Schema.FieldIndices(c)
		if len(idx) != 1 {
			return fmt.Errorf("%w: table %q sorts by %q, which is not a column", ErrInvalidTable, t.Name, c)
		}
		if slices.Contains(t.SortKey[:i], c) {
			return fmt.Errorf("%w: table %q names sort column %q twice", ErrInvalidTable, t.Name, c)
		}
	}
	if t.RowGroupRows != 0 && t.RowGroupRows < 1024 {
		return fmt.Errorf("%w: table %q has row groups of %d rows; use at least 1024, or 0 for the store's", ErrInvalidTable, t.Name, t.RowGroupRows)
	}
	for _, c := range t.NoDictionary {
		if len(t.Schema.FieldIndices(c)) != 1 {
			return fmt.Errorf("%w: table %q turns off the dictionary of %q, which is not a column", ErrInvalidTable, t.Name, c)
		}
	}
	if len(t.Key) > 0 {
		for i, c := range t.Key {
			idx := t.Schema.FieldIndices(c)
			if len(idx) != 1 || slices.Contains(t.Key[:i], c) {
				return fmt.Errorf("%w: table %q has key column %q, which is not a column or named twice", ErrInvalidTable, t.Name, c)
			}
			if _, err := keyKindFor(t.Schema.Field(idx[0]).Type); err != nil {
				return fmt.Errorf("%w: table %q key column %q: %w", ErrInvalidTable, t.Name, c, err)
			}
		}
		for _, want := range []struct {
			name string
			dt   arrow.DataType
		}{{RevColumn, arrow.PrimitiveTypes.Int64}, {DeletedColumn, arrow.FixedWidthTypes.Boolean}} {
			idx := t.Schema.FieldIndices(want.name)
			if len(idx) != 1 || !arrow.TypeEqual(t.Schema.Field(idx[0]).Type, want.dt) {
				return fmt.Errorf("%w: keyed table %q needs a column %q of type %s", ErrInvalidTable, t.Name, want.name, want.dt)
			}
		}
	}
	return nil
}

// SupportedType reports whether columns of type dt can be stored: booleans,
// signed and unsigned integers, floats, strings, binaries, fixed-size
// binaries (UUIDs), timestamps and dates. Nested and dictionary types are
// not supported.
func SupportedType(dt arrow.DataType) error {
	if _, err := typeString(dt); err != nil {
		return err
	}
	return nil
}

// typeString is the manifest's name of a supported type.
func typeString(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return "bool", nil
	case *arrow.Int8Type:
		return "int8", nil
	case *arrow.Int16Type:
		return "int16", nil
	case *arrow.Int32Type:
		return "int32", nil
	case *arrow.Int64Type:
		return "int64", nil
	case *arrow.Uint8Type:
		return "uint8", nil
	case *arrow.Uint16Type:
		return "uint16", nil
	case *arrow.Uint32Type:
		return "uint32", nil
	case *arrow.Uint64Type:
		return "uint64", nil
	case *arrow.Float32Type:
		return "float32", nil
	case *arrow.Float64Type:
		return "float64", nil
	case *arrow.StringType:
		return "string", nil
	case *arrow.LargeStringType:
		return "large_string", nil
	case *arrow.BinaryType:
		return "binary", nil
	case *arrow.LargeBinaryType:
		return "large_binary", nil
	case *arrow.FixedSizeBinaryType:
		return "fixed_size_binary[" + strconv.Itoa(t.ByteWidth) + "]", nil
	case *arrow.Date32Type:
		return "date32", nil
	case *arrow.Date64Type:
		return "date64", nil
	case *arrow.TimestampType:
		if t.TimeZone == "" {
			return "timestamp[" + t.Unit.String() + "]", nil
		}
		return "timestamp[" + t.Unit.String() + ", tz=" + t.TimeZone + "]", nil
	}
	return "", fmt.Errorf("type %s is not supported; use a boolean, integer, float, string, binary, fixed-size binary, timestamp or date", dt)
}

// parseType reads a type name written by typeString.
func parseType(s string) (arrow.DataType, error) {
	switch s {
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "int8":
		return arrow.PrimitiveTypes.Int8, nil
	case "int16":
		return arrow.PrimitiveTypes.Int16, nil
	case "int32":
		return arrow.PrimitiveTypes.Int32, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "uint8":
		return arrow.PrimitiveTypes.Uint8, nil
	case "uint16":
		return arrow.PrimitiveTypes.Uint16, nil
	case "uint32":
		return arrow.PrimitiveTypes.Uint32, nil
	case "uint64":
		return arrow.PrimitiveTypes.Uint64, nil
	case "float32":
		return arrow.PrimitiveTypes.Float32, nil
	case "float64":
		return arrow.PrimitiveTypes.Float64, nil
	case "string":
		return arrow.BinaryTypes.String, nil
	case "large_string":
		return arrow.BinaryTypes.LargeString, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "large_binary":
		return arrow.BinaryTypes.LargeBinary, nil
	case "date32":
		return arrow.FixedWidthTypes.Date32, nil
	case "date64":
		return arrow.FixedWidthTypes.Date64, nil
	}
	if w, ok := strings.CutPrefix(s, "fixed_size_binary["); ok {
		if n, err := strconv.Atoi(strings.TrimSuffix(w, "]")); err == nil && n > 0 && strings.HasSuffix(w, "]") {
			return &arrow.FixedSizeBinaryType{ByteWidth: n}, nil
		}
	}
	if rest, ok := strings.CutPrefix(s, "timestamp["); ok && strings.HasSuffix(rest, "]") {
		rest = strings.TrimSuffix(rest, "]")
		unit, tz, _ := strings.Cut(rest, ", tz=")
		for _, u := range []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond} {
			if u.String() == unit {
				return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
			}
		}
	}
	return nil, fmt.Errorf("unknown column type %q", s)
}

// Column is a column of a table as the manifest records it: its name, its
// type (the names SupportedType accepts, e.g. "int64", "string",
// "fixed_size_binary[16]", "timestamp[ms, tz=UTC]") and whether it may hold
// nulls.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable,omitempty"`
}

// schemaColumns describes a schema of supported types for the manifest.
func schemaColumns(s *arrow.Schema) ([]Column, error) {
	cols := make([]Column, 0, s.NumFields())
	for _, f := range s.Fields() {
		ts, err := typeString(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols = append(cols, Column{Name: f.Name, Type: ts, Nullable: f.Nullable})
	}
	return cols, nil
}

// columnsSchema rebuilds an Arrow schema from its manifest description.
func columnsSchema(cols []Column) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(cols))
	for _, c := range cols {
		dt, err := parseType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		fields = append(fields, arrow.Field{Name: c.Name, Type: dt, Nullable: c.Nullable})
	}
	return arrow.NewSchema(fields, nil), nil
}
