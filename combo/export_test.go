package combo

import (
	"context"
	"net/http"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

// The external tests name the built-in strategies, which the package keeps
// unexported, through these.

const (
	StrategyPriority         = strategyPriority
	StrategyWeighted         = strategyWeighted
	StrategyRoundRobin       = strategyRoundRobin
	StrategyFillFirst        = strategyFillFirst
	StrategyP2C              = strategyP2C
	StrategyRandom           = strategyRandom
	StrategyStrictRandom     = strategyStrictRandom
	StrategyLeastUsed        = strategyLeastUsed
	StrategyCostOptimized    = strategyCostOptimized
	StrategyResetAware       = strategyResetAware
	StrategyResetWindow      = strategyResetWindow
	StrategyHeadroom         = strategyHeadroom
	StrategyLKGP             = strategyLKGP
	StrategyContextOptimized = strategyContextOptimized
	StrategyCacheOptimized   = strategyCacheOptimized
	StrategyQuotaShare       = strategyQuotaShare
	StrategyAuto             = strategyAuto
	StrategyContextRelay     = strategyContextRelay
)

type (
	Priority         = priorityOrder
	LeastUsed        = leastUsed
	CostOptimized    = costOptimized
	ContextOptimized = contextOptimized
	LastKnownGood    = lastKnownGood
	CacheOptimized   = cacheOptimized
	QuotaShare       = quotaShare
	ResetAware       = resetAware
	ResetWindow      = resetWindow
	Headroom         = headroomOrder
	Auto             = autoStrategy
	AutoExcluded     = autoExcluded
)

var (
	NewRoundRobin   = newRoundRobin
	NewWeighted     = newWeighted
	NewP2C          = newP2C
	P2CScore        = p2cScore
	NewRandom       = newRandom
	NewStrictRandom = newStrictRandom
	NewAuto         = newAuto
)

// The terminal answers' reasons and rendering, as the tests read them.
const (
	TerminalAllCoolingDown = terminalAllCoolingDown
	TerminalNoExecutable   = terminalNoExecutable
	TerminalCapability     = terminalCapability
	TerminalQueueFull      = terminalQueueFull
)

type (
	Body          = terminalBody
	ExclusionJSON = exclusionJSON
)

func TerminalHeader(e *Error) http.Header { return e.terminalHeader() }
func TerminalBody(e *Error) Body          { return e.terminalBody() }

const (
	SessionWindow = sessionWindow
	WeeklyWindow  = weeklyWindow
	MonthlyWindow = monthlyWindow
)

type QuotaFunc = quotaFunc

var ParseToolLimit = parseToolLimit

type (
	CacheHint    = cacheHint
	StepSendFunc = func(ctx context.Context, t *Target, step int, input []byte) (*http.Response, error)
)

// The breaker states as the tests name them.
const (
	BreakerClosed   = breaker.Closed
	BreakerDegraded = breaker.Degraded
	BreakerHalfOpen = breaker.HalfOpen
	BreakerOpen     = breaker.Open
)

// Methods the package keeps unexported, for the tests.

func (f Fusion) Normalize() Fusion                         { return f.normalize() }
func (l *ToolLimits) SnapshotAt(now time.Time) []ToolLimit { return l.snapshotAt(now) }
func (l *ToolLimits) Forget(provider, model string)        { l.forget(provider, model) }
func (s Stats) SuccessRate() float64                       { return s.successRate() }
func (e *EmergencyFallback) Enabled() bool                 { return e.enabled() }
