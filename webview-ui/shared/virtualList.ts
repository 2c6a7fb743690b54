// Virtualised list arithmetic (fixed row height): which rows to render for a scroll
// position, and where to scroll to show a row. Pure, so that it is unit-tested.

export interface Window {
  /** First and one-past-last row index to render (overscan included). */
  first: number;
  last: number;
  /** Offset of row `first` from the top of the content. */
  offset: number;
}

export function visibleWindow(scrollTop: number, viewportHeight: number, rowHeight: number, count: number, overscan = 8): Window {
  if (count <= 0 || rowHeight <= 0) return { first: 0, last: 0, offset: 0 };
  const top = Math.max(0, Math.min(scrollTop, Math.max(0, count * rowHeight - viewportHeight)));
  const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
  const last = Math.min(count, Math.ceil((top + Math.max(0, viewportHeight)) / rowHeight) + overscan);
  return { first, last, offset: first * rowHeight };
}

/** The scrollTop that brings row `index` fully into view, or the current one when it already is. */
export function scrollToShow(index: number, scrollTop: number, viewportHeight: number, rowHeight: number): number {
  const top = index * rowHeight;
  const bottom = top + rowHeight;
  if (top < scrollTop) return top;
  if (bottom > scrollTop + viewportHeight) return Math.max(0, bottom - viewportHeight);
  return scrollTop;
}

/** The row a key moves to (ArrowUp/Down, PageUp/Down, Home/End), or null for other keys. */
export function keyTarget(key: string, current: number, count: number, pageRows: number): number | null {
  if (count === 0) return null;
  const clamp = (i: number) => Math.max(0, Math.min(count - 1, i));
  switch (key) {
    case 'ArrowDown':
      return clamp(current < 0 ? 0 : current + 1);
    case 'ArrowUp':
      return clamp(current < 0 ? 0 : current - 1);
    case 'PageDown':
      return clamp(current + Math.max(1, pageRows));
    case 'PageUp':
      return clamp(current - Math.max(1, pageRows));
    case 'Home':
      return 0;
    case 'End':
      return count - 1;
    default:
      return null;
  }
}
