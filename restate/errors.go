package restate

import (
	"errors"
	"strings"
)

// Codes of [Error].
const (
	// CodeInvalidConfig is an environment value [FromEnv] could not use.
	CodeInvalidConfig = "invalid_config"
	// CodeInvalidRule is a table or an operator rule set that
	// [Classifier.SetTables] or [Classifier.SetOperatorRules] refused.
	CodeInvalidRule = "invalid_rule"
)

// Sentinels matched by [Error] through errors.Is.
var (
	// ErrInvalidConfig matches every [Error] with code [CodeInvalidConfig].
	ErrInvalidConfig = errors.New("restate: invalid config")
	// ErrInvalidRule matches every [Error] with code [CodeInvalidRule].
	ErrInvalidRule = errors.New("restate: invalid rule")
)

// Error is a refusal of this package, with its code and HTTP status. Every
// error the package returns is an *Error (match it with errors.As); its
// Unwrap gives the code's sentinel (match it with errors.Is).
type Error struct {
	// Code is [CodeInvalidConfig] or [CodeInvalidRule].
	Code string
	// Status is the HTTP status of the code: 400, the input is bad.
	Status int
	// Field names what was refused: the environment variable, or the
	// rule's place in its table, such as Restatements["agentrouter"][0],
	// ProviderRules["x"][2], TextRules[3], StatusRules[0],
	// OperatorRules["acme"][1] or OperatorRules for the whole set.
	Field string
	// Rule is the refused rule's id, "" when it has none (text and status
	// rules, a refused value).
	Rule string
	// Problem says what is wrong.
	Problem string
}

// Error returns "restate: <code>: <field> (<rule>): <problem>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("restate: ")
	b.WriteString(e.Code)
	b.WriteString(": ")
	b.WriteString(e.Field)
	if e.Rule != "" {
		b.WriteString(" (")
		b.WriteString(e.Rule)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Unwrap returns the sentinel of e.Code: [ErrInvalidConfig] or
// [ErrInvalidRule]; nil for any other code.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeInvalidConfig:
		return ErrInvalidConfig
	case CodeInvalidRule:
		return ErrInvalidRule
	}
	return nil
}

// ruleError is the refusal of one rule.
func ruleError(field, id, problem string) *Error {
	return &Error{Code: CodeInvalidRule, Status: 400, Field: field, Rule: id, Problem: problem}
}
