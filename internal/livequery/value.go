package livequery

import "kubegate/internal/cell"

// Value is one typed cell or sort key of a row (package cell).
type Value = cell.Value

// Kind is the type of a Value.
type Kind = cell.Kind

// The kinds of values, in their sort order; missing values go last.
const (
	KindMissing = cell.KindMissing
	KindNumber  = cell.KindNumber
	KindTime    = cell.KindTime
	KindString  = cell.KindString
)

// The value constructors and order of package cell.
var (
	String   = cell.String
	Int      = cell.Int
	Quantity = cell.Quantity
	Time     = cell.Time
	Parse    = cell.Parse
	Compare  = cell.Compare
)
