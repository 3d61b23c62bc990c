package wasm_test

import (
	"context"
	"fmt"

	"github.com/mfhq/mf/evaluator"
	"github.com/mfhq/mf/wasm"
)

// The server evaluates flags through the same WebAssembly module browsers
// run: load the document once, then evaluate by key.
func Example() {
	ctx := context.Background()
	e, err := wasm.New(ctx, wasm.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)

	doc, err := e.LoadDocument(ctx, []byte(`{"v":1,"flags":{"checkout":{
		"s":"3f9a1c0b7e2d","t":"m","u":"b","d":"a","p":{"b":{"color":"green"}},
		"r":[{"sh":8000,"w":[["a",5000],["b",5000]]}]}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := doc.Evaluate(ctx, "checkout", []byte(`{"id":"user-42"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(evaluator.AppendResult(nil, r)))

	line, err := e.EvaluateCase(ctx, nil, []byte(`{"flag":{"s":"3f9a1c0b7e2d","t":"b","u":"b","d":"off","off":1,"r":[]}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(line))

	m := wasm.Module()
	fmt.Println(m.ContentType, len(m.Hash))
	// Output:
	// {"variant":"b","reason":"SPLIT","rule":0,"value":{"color":"green"}}
	// {"variant":"off","reason":"DISABLED"}
	// application/wasm 32
}
