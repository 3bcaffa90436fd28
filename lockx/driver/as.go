package driver

import "reflect"

// As finds the first backend in b's chain that has the type target points
// to, sets target to it and returns true; it returns false if there is none.
// It is errors.As for backends: target is a non-nil pointer to a capability
// interface (or to a concrete backend type), and the chain is b itself, then
// what b's As method answers, then b's Unwrap, and so on:
//
//	var ln driver.LossNotifier
//	if driver.As(b, &ln) {
//		stop := ln.NotifyLoss(key, owner, onLoss)
//		…
//	}
//
// A wrapper takes part in one of two ways, and the choice is about safety,
// not convenience:
//
//   - Unwrap() Backend says the wrapper is transparent: every capability of
//     the inner backend may be used directly, bypassing the wrapper.
//   - As(target any) bool lets the wrapper answer for each capability it
//     knows, with an adapter of its own (a circuit breaker answers a
//     Notifier with one whose Watch goes through the breaker). A wrapper
//     that must see every call — a breaker, a rate limiter — implements As
//     and not Unwrap, so a capability it does not know stays hidden rather
//     than reachable around it.
//
// Code that needs a capability (the Client, the patterns) asks As, never a
// type assertion, so a capability survives any wrapper that forwards it,
// and a wrapper implements each capability once — no type per combination
// of capabilities. A nil b, a nil target or a target that is not a non-nil
// pointer yields false.
func As(b Backend, target any) bool {
	if b == nil || target == nil {
		return false
	}
	val := reflect.ValueOf(target)
	if val.Kind() != reflect.Pointer || val.IsNil() {
		return false
	}
	want := val.Type().Elem()
	// The bound stops a wrapper chain that loops back on itself.
	for range maxChain {
		if reflect.TypeOf(b).AssignableTo(want) {
			val.Elem().Set(reflect.ValueOf(b))
			return true
		}
		if a, ok := b.(interface{ As(any) bool }); ok && a.As(target) {
			return true
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return false
		}
		if b = u.Unwrap(); b == nil {
			return false
		}
	}
	return false
}

// maxChain bounds the wrappers As walks through.
const maxChain = 64
