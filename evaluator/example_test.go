package evaluator_test

import (
	"fmt"
	"os"

	"github.com/mfhq/mf/evaluator"
)

func Example() {
	flag, err := evaluator.ParseFlag([]byte(`{"s":"3f9a1c0b7e2d","t":"m","u":"p","d":"control",
		"p":{"green":{"color":"green"}},
		"r":[{"if":[["p","plan","is",["pro"]]],"x":"green"},{"sh":5000,"w":[["green",10000]]}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	facts, err := evaluator.ParseFacts([]byte(`{"userId":"user-42","properties":{"plan":"pro"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	res := flag.Evaluate(facts)
	fmt.Println(string(evaluator.AppendResult(nil, res)))
	// Output: {"variant":"green","reason":"TARGETING_MATCH","rule":0,"value":{"color":"green"}}
}

func ExampleParseCase() {
	for _, line := range []string{
		`{"flag":{"s":"3f9a1c0b7e2d","t":"b","u":"b","d":"off","r":[{"sh":6138,"w":[["on",10000]]}]},"facts":{"id":"user-42"}}`,
		`{"flag":{"s":"3f9a1c0b7e2d","t":"b","u":"b","d":"off","r":[{"if":[["s","beta"]],"x":"on"}]},"facts":{"segments":"pending"}}`,
		`{"flag":`,
	} {
		res := evaluator.ParseErrorResult()
		if flag, facts, err := evaluator.ParseCase([]byte(line)); err == nil {
			res = flag.Evaluate(facts)
		}
		os.Stdout.Write(append(evaluator.AppendResult(nil, res), '\n'))
	}
	// Output:
	// {"variant":"on","reason":"SPLIT","rule":0}
	// {"reason":"ERROR","errorCode":"NOT_READY"}
	// {"reason":"ERROR","errorCode":"PARSE_ERROR"}
}

func ExampleFlag_Explain() {
	flag, facts, _ := evaluator.ParseCase([]byte(`{"flag":{"s":"3f9a1c0b7e2d","t":"b","u":"b","d":"off",
		"r":[{"if":[["p","country","is",["DE"]],["p","age","gt",17]],"x":"on"},{"sh":6137,"w":[["on",10000]]}]},
		"facts":{"id":"user-42","properties":{"country":"DE","age":16}}}`))
	res, x := flag.Explain(facts)
	fmt.Print(x)
	fmt.Println(string(evaluator.AppendResult(nil, res)))
	// Output:
	// unit: id, usable
	// rule 0:
	//   condition 0 ["p","country","is",["DE"]] holds
	//   condition 1 ["p","age","gt",17] fails
	//   a condition failed: next rule
	// rule 1:
	//   share bucket 6137
	//   outside the share: default
	// {"variant":"off","reason":"DEFAULT","rule":1}
}

func ExampleBucket() {
	fmt.Println(evaluator.Bucket("3f9a1c0b7e2d", ".r", "user-42"))
	// Output: 6137
}
