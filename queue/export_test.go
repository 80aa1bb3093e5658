package queue

// ParseLimits and Limits expose the header reader to the external tests.
var ParseLimits = parseLimits

type Limits = rateHints
