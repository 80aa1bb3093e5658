package admin

// Internals the external tests use.
type LeaseCommand = command

var (
	ParseLeaseCommand = parseCommand
	ErrActionInvalid  = errActionInvalid
)

const (
	MinMaxBodyBytes = minMaxBodyBytes
	MaxModelLen     = maxModelLen
)

// DefaultMaxBody is the default limit on a management request body.
const DefaultMaxBody = defaultMaxBody
