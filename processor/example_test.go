package processor_test

import (
	"fmt"
	"slices"

	"github.com/mfhq/mf/processor"
)

// The processor's tables, with the columns their rows are sorted by.
func ExampleTables() {
	tables := processor.Tables()
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Println(n, tables[n].SortKey)
	}
	// Output:
	// activity [kind]
	// conversions [action time event_id]
	// events [unit time id]
	// identities [unit]
	// people [ref]
	// processor_state [ref kind sub]
	// segment_members [segment person]
	// segments [segment]
	// visits [unit start id]
}

// A configuration is checked before use; Validate says what to fix.
func ExampleConfig_Validate() {
	cfg := processor.DefaultConfig()
	fmt.Println(cfg.Validate())
	cfg.LateWindow = 0
	fmt.Println(cfg.Validate() != nil)
	// Output:
	// <nil>
	// true
}
