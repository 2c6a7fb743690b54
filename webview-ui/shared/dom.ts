// A tiny element builder: text goes in as text nodes (never as HTML), so nothing a
// transcript holds can become markup.
type Attrs = Record<string, string | number | boolean | null | undefined>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function byId<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing`);
  return el as T;
}

/** A message strip at the top of a panel (errors from validation, status from the extension). */
export function showBanner(host: HTMLElement, level: 'info' | 'warning' | 'error' | 'waiting', text: string): void {
  clear(host);
  if (text === '') {
    host.hidden = true;
    return;
  }
  host.hidden = false;
  host.className = `banner ${level}`;
  host.setAttribute('role', level === 'error' ? 'alert' : 'status');
  host.append(text);
}

/** A CSS custom property of the theme (VS Code sets them on <html>), with a fallback. */
export function themeVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

/** Calls `f` when VS Code switches theme (it changes the body's class). */
export function onThemeChange(f: () => void): void {
  new MutationObserver(f).observe(document.body, { attributes: true, attributeFilter: ['class'] });
}
