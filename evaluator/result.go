package evaluator

import "strconv"

var reasonNames = [...]string{"ERROR", "STATIC", "TARGETING_MATCH", "SPLIT", "DEFAULT", "DISABLED"}

// String returns the reason as the result line writes it, e.g. "SPLIT".
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "UNKNOWN"
}

var errorCodeNames = [...]string{"", "UNSUPPORTED", "NOT_READY", "PARSE_ERROR"}

// String returns the code as the result line writes it, e.g. "NOT_READY";
// ErrorNone is "".
func (c ErrorCode) String() string {
	if int(c) < len(errorCodeNames) {
		return errorCodeNames[c]
	}
	return "UNKNOWN"
}

// ParseErrorResult returns the result of a line that is not a case.
func ParseErrorResult() Result {
	return Result{Reason: ReasonError, Rule: -1, ErrorCode: ErrorParse}
}

// AppendResult appends the result line of the operations contract (without
// a line feed), with members in this fixed order and no whitespace:
//
//	{"variant":"b","reason":"SPLIT","rule":1,"value":{"color":"green"}}
//	{"reason":"ERROR","errorCode":"NOT_READY"}
//
// "rule" is left out when r.Rule < 0, "value" when r.Value is nil, and
// "errorCode" when it is ErrorNone. Value is copied as it is (canonical
// JSON when it comes from Evaluate).
func AppendResult(dst []byte, r Result) []byte {
	if r.Reason == ReasonError {
		dst = append(dst, `{"reason":"ERROR"`...)
		if r.ErrorCode != ErrorNone {
			dst = append(dst, `,"errorCode":"`...)
			dst = append(dst, r.ErrorCode.String()...)
			dst = append(dst, '"')
		}
		return append(dst, '}')
	}
	dst = append(dst, `{"variant":`...)
	dst = AppendJSONString(dst, r.Variant)
	dst = append(dst, `,"reason":"`...)
	dst = append(dst, r.Reason.String()...)
	dst = append(dst, '"')
	if r.Rule >= 0 {
		dst = append(dst, `,"rule":`...)
		dst = strconv.AppendInt(dst, int64(r.Rule), 10)
	}
	if r.Value != nil {
		dst = append(dst, `,"value":`...)
		dst = append(dst, r.Value...)
	}
	return append(dst, '}')
}
