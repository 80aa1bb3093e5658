package otelmetrics

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/internal/metricscore"
)

// Span attributes of the GenAI semantic conventions and of routeguard.
const (
	attrTimeToFirstChunk = attribute.Key("gen_ai.response.time_to_first_chunk")
	attrStatusCode       = attribute.Key("http.response.status_code")
	attrCombo            = attribute.Key("routeguard.combo")
	attrAttempts         = attribute.Key("routeguard.attempts")
	attrOutcome          = attribute.Key("routeguard.outcome")
	attrReason           = attribute.Key("routeguard.reason")
	attrCut              = attribute.Key("routeguard.stream.cut")
	attrQueueWait        = attribute.Key("routeguard.queue_wait")
	attrFirstByte        = attribute.Key("routeguard.first_byte")
	attrUsefulBytes      = attribute.Key("routeguard.stream.useful_bytes")
	attrRetryAfter       = attribute.Key("routeguard.retry_after")
	attrRetrySame        = attribute.Key("routeguard.retry_same_target")

	// eventExclusion is the span event of a target kept out before
	// dispatch or skipped at it.
	eventExclusion = "routeguard.exclusion"
)

// TraceOptions configure Traces. The zero value is usable but records into
// a no-op tracer provider.
type TraceOptions struct {
	// TracerProvider creates the package's tracer (scope ScopeName). nil
	// means a no-op provider: nothing is recorded.
	TracerProvider trace.TracerProvider
	// Operation is the gen_ai.operation.name of every span. Default "chat".
	Operation string
}

// Traces records one span per routed request and, under it, one client
// span per attempt made, with the GenAI semantic conventions' attributes;
// the targets kept out before dispatch or skipped at it are events of the
// request span. It depends on the OpenTelemetry trace API only.
//
// The spans are made when the request ends (from combo.Config.OnRequest),
// with the start and end times of the trail, on the router's clock; the
// request span is a child of the span in the context given to Do.
// Traces is safe for concurrent use.
type Traces struct {
	tracer trace.Tracer
	op     string
}

// NewTraces returns Traces whose spans come from o.TracerProvider.
func NewTraces(o TraceOptions) *Traces {
	tp := o.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	t := &Traces{tracer: tp.Tracer(ScopeName), op: o.Operation}
	if t.op == "" {
		t.op = metricscore.DefaultOperation
	}
	return t
}

// Attach chains the Traces into cfg.OnRequest (a hook already set is called
// first). Call it before combo.New(cfg), once.
func (t *Traces) Attach(cfg *combo.Config) {
	cfg.OnRequest = metricscore.Chain(cfg.OnRequest, t.onRequest)
}

// onRequest records the spans of one routed request.
//
// The request span is named "<operation> <combo>"; its attributes are
// gen_ai.operation.name, routeguard.combo, routeguard.attempts (made) and,
// when it failed, error.type (the *combo.Error's code, else _OTHER) with
// the status Error. Each attempt span is named "<operation> <model>", of
// kind client, with gen_ai.operation.name, gen_ai.provider.name,
// gen_ai.request.model, routeguard.outcome, http.response.status_code
// (when there was an answer), error.type and routeguard.reason for a
// failure, routeguard.queue_wait and routeguard.first_byte (seconds), and
// for a committed stream gen_ai.response.time_to_first_chunk and
// routeguard.stream.useful_bytes; routeguard.stream.cut names why a stream
// was cut. gen_ai.response.model is not set: the router does not read it
// from the answer.
func (t *Traces) onRequest(e combo.RequestEnd) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	made := 0
	for i := range e.Attempts {
		if e.Attempts[i].Outcome != combo.OutcomeSkipped {
			made++
		}
	}
	ctx, span := t.tracer.Start(ctx, t.op+" "+e.Combo, trace.WithTimestamp(e.Start),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrOperationName.String(t.op), attrCombo.String(e.Combo), attrAttempts.Int(made)))
	if !span.IsRecording() {
		return // sampled out, or no SDK
	}
	for i := range e.Excluded {
		x := &e.Excluded[i]
		span.AddEvent(eventExclusion, trace.WithTimestamp(e.Start), trace.WithAttributes(
			attrProviderName.String(x.Provider), attrRequestModel.String(x.Model),
			attrReason.String(metricscore.BoundedLabel(string(x.Reason))), attrRetryAfter.Float64(x.RetryAfter.Seconds())))
	}
	for i := range e.Attempts {
		a := &e.Attempts[i]
		if a.Outcome == combo.OutcomeSkipped {
			span.AddEvent(eventExclusion, trace.WithTimestamp(a.Start), trace.WithAttributes(
				attrProviderName.String(a.Target.Provider), attrRequestModel.String(a.Target.Model),
				attrReason.String(metricscore.BoundedLabel(string(a.Reason)))))
			continue
		}
		t.attemptSpan(ctx, a)
	}
	if e.Err != nil {
		errType := metricscore.ErrorTypeOther
		if ce, ok := errors.AsType[*combo.Error](e.Err); ok && ce.Code != "" {
			errType = metricscore.BoundedLabel(ce.Code)
		}
		span.SetAttributes(attrErrorType.String(errType))
		span.SetStatus(codes.Error, errType)
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

func (t *Traces) attemptSpan(ctx context.Context, a *combo.Attempt) {
	attrs := []attribute.KeyValue{
		attrOperationName.String(t.op), attrProviderName.String(a.Target.Provider),
		attrRequestModel.String(a.Target.Model), attrOutcome.String(string(a.Outcome)),
		attrQueueWait.Float64(a.QueueWait.Seconds()),
	}
	if a.FirstByte > 0 {
		attrs = append(attrs, attrFirstByte.Float64(a.FirstByte.Seconds()))
	}
	if a.Status != 0 {
		attrs = append(attrs, attrStatusCode.Int(a.Status))
	}
	if a.FirstOutput > 0 {
		attrs = append(attrs, attrTimeToFirstChunk.Float64(a.FirstOutput.Seconds()),
			attrUsefulBytes.Int64(a.UsefulBytes))
	}
	if a.Cut != "" {
		attrs = append(attrs, attrCut.String(metricscore.BoundedLabel(a.Cut)))
	}
	errType := ""
	if a.Outcome == combo.OutcomeFailed {
		errType = metricscore.ErrorType(a.Status)
		attrs = append(attrs, attrErrorType.String(errType), attrReason.String(metricscore.BoundedLabel(a.Code)))
		if a.Code == metricscore.RetrySameTarget {
			attrs = append(attrs, attrRetrySame.Bool(true))
		}
	}
	_, span := t.tracer.Start(ctx, t.op+" "+a.Target.Model, trace.WithTimestamp(a.Start),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if errType != "" {
		span.SetStatus(codes.Error, errType)
	}
	span.End(trace.WithTimestamp(a.Start.Add(a.Duration)))
}
