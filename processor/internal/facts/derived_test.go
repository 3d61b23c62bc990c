package facts

import (
	"hash/maphash"
	"reflect"
	"testing"
)

// The engine keeps only a hash of each person's row and writes the row
// again when the hash changes: a change of any field of the row changes
// the hash.
func TestPersonRowHashCoversEveryField(t *testing.T) {
	seed := maphash.MakeSeed()
	base := PersonRow{Revenue: Money{{Currency: "EUR", Micro: 5}}}
	want := base.hash(seed)
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct {
				walk(f, name+".")
				continue
			}
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Int64, reflect.Int32, reflect.Int:
				f.SetInt(7)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Array:
				f.Index(0).Set(reflect.ValueOf(byte(1)).Convert(f.Type().Elem()))
			case reflect.Slice: // Revenue
				f.Set(reflect.ValueOf(Money{{Currency: "EUR", Micro: 6}}))
			default:
				t.Fatalf("field %s of kind %s: teach this test to change it", name, f.Kind())
			}
			if got := base.hash(seed); got == want {
				t.Errorf("changing %s left the row's hash as it was", name)
			}
			f.Set(old)
		}
	}
	walk(reflect.ValueOf(&base).Elem(), "")
	if got := base.hash(seed); got != want {
		t.Fatal("the row restored hashes differently")
	}
}
