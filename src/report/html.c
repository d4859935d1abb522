/*
 * html.c: the page every HTML report shares (html.h).
 *
 * The page is one file that opens offline: CSS and the script are inline,
 * charts are inline SVG, and a Content-Security-Policy forbids every fetch
 * (default-src 'none'), so even a link in a quoted log line cannot make the
 * browser load anything. The script only adds hover values and highlights
 * the region a followed finding link points at; without it the page reads
 * the same (the tables are static). Colours are the Okabe-Ito palette,
 * which stays distinct under the common colour-vision deficiencies, with a
 * dark variant and a print style.
 */
#include "html.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

void tw_html_text(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            fputc(c < 0x20 && c != '\t' && c != '\n' ? ' ' : c, out);
        }
    }
}

static const char css[] =
    ":root{--bg:#fff;--fg:#1b1b1b;--muted:#5b5b5b;--grid:#e3e3e3;--axis:#444;--band0:rgba(0,114,178,.07);"
    "--band1:rgba(230,159,0,.09);--hl:rgba(213,94,0,.28);--card:#f6f6f6;--err:#b33c00;--warn:#8a6d00;--info:#0b5f8f;"
    "--c0:#0072B2;--c1:#E69F00;--c2:#009E73;--c3:#D55E00;--c4:#CC79A7;--c5:#56B4E9;--c6:#8c7a00;--c7:#1b1b1b;"
    "color-scheme:light dark}\n"
    "@media (prefers-color-scheme:dark){:root{--bg:#15171a;--fg:#e6e6e6;--muted:#a8a8a8;--grid:#2c3035;--axis:#bbb;"
    "--band0:rgba(86,180,233,.10);--band1:rgba(230,159,0,.12);--hl:rgba(213,94,0,.40);--card:#1f2226;--err:#ff8a50;"
    "--warn:#f0e442;--info:#56b4e9;--c0:#56B4E9;--c6:#F0E442;--c7:#e6e6e6}}\n"
    "body{background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;"
    "margin:0 auto;max-width:1000px;padding:0 16px 40px}\n"
    "h1{font-size:1.5em;margin:.8em 0 .1em}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid var(--grid)}"
    ".sub{color:var(--muted);margin:0 0 .6em}a{color:var(--c0)}\n"
    "table{border-collapse:collapse;margin:.3em 0}th,td{text-align:left;padding:2px 10px 2px 0;vertical-align:top}"
    "td{font-variant-numeric:tabular-nums}\n"
    ".findings{list-style:none;padding:0}.finding{background:var(--card);border-left:5px solid var(--info);"
    "padding:6px 10px;margin:6px 0}.finding.error{border-color:var(--err)}.finding.warning{border-color:var(--warn)}"
    ".sev{font-weight:600;text-transform:uppercase;font-size:.8em;margin-right:.5em}.error .sev{color:var(--err)}"
    ".warning .sev{color:var(--warn)}.info .sev{color:var(--info)}.evidence{margin:.2em 0 .2em 1em;padding:0}"
    ".rec{margin:.2em 0;color:var(--muted)}blockquote.logline{margin:.3em 0;padding:3px 8px;background:var(--bg);"
    "border:1px solid var(--grid);font:12px/1.4 ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}"
    ".where{font:12px ui-monospace,monospace;color:var(--muted)}\n"
    "figure.chart{margin:1em 0;position:relative;break-inside:avoid}figcaption{font-weight:600}"
    ".note{color:var(--muted);margin:.1em 0;font-size:.9em}\n"
    "svg.plot{width:100%;height:auto;display:block}svg .grid{stroke:var(--grid)}svg .axis{stroke:var(--axis)}"
    "svg text{fill:var(--muted);font-size:11px}svg .label{fill:var(--fg)}svg .s{fill:none;stroke-width:1.6;"
    "stroke-linejoin:round}svg .dashed{stroke-dasharray:5 3}svg .band.b0{fill:var(--band0)}svg .band.b1{"
    "fill:var(--band1)}svg .bandlabel{font-size:10px}svg .bad{fill:var(--c3)}svg .cap{stroke:var(--c3);"
    "stroke-dasharray:2 3}svg .caplabel{fill:var(--c3)}svg .hl rect{fill:var(--hl)}svg .hl{display:none}"
    "svg .hl:target,svg .hl.on{display:inline}svg .guide{stroke:var(--muted)}\n"
    ".c0{stroke:var(--c0);background:var(--c0)}.c1{stroke:var(--c1);background:var(--c1)}.c2{stroke:var(--c2);"
    "background:var(--c2)}.c3{stroke:var(--c3);background:var(--c3)}.c4{stroke:var(--c4);background:var(--c4)}"
    ".c5{stroke:var(--c5);background:var(--c5)}.c6{stroke:var(--c6);background:var(--c6)}.c7{stroke:var(--c7);"
    "background:var(--c7)}circle.dot{fill:var(--bg);stroke-width:2}\n"
    ".legend{list-style:none;padding:0;margin:.2em 0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:.9em}"
    ".key{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:5px}"
    ".key.dashed{background:repeating-linear-gradient(90deg,currentColor 0 5px,transparent 5px 8px)}"
    ".capkey{background:var(--c3)}.badkey{color:var(--c3)}\n"
    ".tip{position:absolute;pointer-events:none;background:var(--card);border:1px solid var(--grid);padding:3px 6px;"
    "font-size:12px;white-space:pre;z-index:2}\n"
    "details.tableview{font-size:.85em}details.tableview table{max-height:none}"
    ".xaxis{margin:.4em 0;font-size:.9em}.xaxis label{margin-right:1em;cursor:pointer}.xaxis a{text-decoration:none}"
    "#x-step:checked~header label[for=x-step] a,#x-time:checked~header label[for=x-time] a{font-weight:700;"
    "text-decoration:underline}\n"
    "#x-time:checked~main svg.v-step{display:none}#x-step:checked~main svg.v-time{display:none}"
    "#x-time:checked~main figure.notime svg.v-step{display:block}"
    "#x-step:checked~main figure.timeonly svg.v-time{display:block}\n"
    ".f0{fill:var(--c0);background:var(--c0)}.f1{fill:var(--c1);background:var(--c1)}.f2{fill:var(--c2);"
    "background:var(--c2)}.f3{fill:var(--muted);background:var(--muted)}.key.f0,.key.f1,.key.f2,.key.f3{height:10px}"
    "caption{text-align:left;font-weight:600;padding:.6em 0 .2em}\n"
    "@media print{.xaxis,.tip,input,details.tableview{display:none}svg.v-time{display:none!important}"
    "svg.v-step{display:block!important}figure.timeonly svg.v-time{display:block!important}"
    "body{max-width:none}h2{break-after:avoid}}\n";

/* Hover values (read from each chart's table) and the highlight of the
 * region a finding link points at, in both views. */
static const char script[] =
    "(function(){'use strict';\n"
    "function data(fig){if(fig.twData)return fig.twData;var d=[];fig.querySelectorAll('table.points tbody')"
    ".forEach(function(tb){var s={name:tb.getAttribute('data-series'),p:[]};tb.querySelectorAll('tr').forEach("
    "function(tr){var c=tr.children;if(c[0].tagName!=='TD')return;s.p.push([parseFloat(c[0].textContent),"
    "c.length>2?parseFloat(c[1].textContent):NaN,c[c.length-1].textContent]);});d.push(s);});fig.twData=d;return d;}\n"
    "document.querySelectorAll('svg.plot').forEach(function(svg){var fig=svg.closest('figure');"
    "var tip=fig.querySelector('.tip'),guide=svg.querySelector('.guide');var time=svg.classList.contains('v-time');"
    "svg.addEventListener('mouseleave',function(){tip.hidden=true;guide.setAttribute('visibility','hidden');});"
    "svg.addEventListener('mousemove',function(e){var r=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal;"
    "var X=(e.clientX-r.left)/r.width*vb.width,L=+svg.getAttribute('data-left'),R=+svg.getAttribute('data-right');"
    "if(X<L||X>R){tip.hidden=true;guide.setAttribute('visibility','hidden');return;}"
    "var x0=+svg.getAttribute('data-x0'),x1=+svg.getAttribute('data-x1'),x=x0+(X-L)/(R-L)*(x1-x0),lines=[];"
    "data(fig).forEach(function(s){var b=null,bd=Infinity;s.p.forEach(function(p){var v=time?p[1]:p[0],"
    "dd=Math.abs(v-x);if(dd<bd){bd=dd;b=p;}});if(b)lines.push(s.name+': '+b[2]+'  ('+(isNaN(b[0])?'':'step '+b[0])+"
    "(isNaN(b[1])?'':(isNaN(b[0])?'':', ')+b[1].toFixed(1)+' s')+')');});"
    "if(!lines.length)return;tip.textContent=lines.join('\\n');"
    "tip.hidden=false;var fr=fig.getBoundingClientRect();tip.style.left=(e.clientX-fr.left+12)+'px';"
    "tip.style.top=(e.clientY-fr.top+12)+'px';guide.setAttribute('x1',X);guide.setAttribute('x2',X);"
    "guide.setAttribute('visibility','visible');});});\n"
    "function hl(){document.querySelectorAll('.hl.on').forEach(function(e){e.classList.remove('on');});"
    "var m=/^#f-(\\d+)$/.exec(location.hash);if(!m)return;var first=null;"
    "document.querySelectorAll('.hl[data-f=\"'+m[1]+'\"]').forEach(function(e){e.classList.add('on');"
    "if(!first&&e.getBoundingClientRect().width>0)first=e;});if(first)first.closest('figure').scrollIntoView();}\n"
    "window.addEventListener('hashchange',hl);hl();})();\n";

void tw_html_begin(FILE *out, const char *title, const char *subtitle, bool time_axis)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "script-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"trainwatch\">\n<title>",
          out);
    tw_html_text(out, title);
    fprintf(out, "</title>\n<style>\n%s</style></head>\n<body>\n", css);
    if (time_axis)
        fputs("<input type=\"radio\" name=\"xaxis\" id=\"x-step\" checked hidden>"
              "<input type=\"radio\" name=\"xaxis\" id=\"x-time\" hidden>\n",
              out);
    fputs("<header><h1>", out);
    tw_html_text(out, title);
    fputs("</h1><p class=\"sub\">", out);
    tw_html_text(out, subtitle);
    fputs("</p>", out);
    if (time_axis)
        fputs("<p class=\"xaxis\">x axis: <label for=\"x-step\"><a>&#9679; step</a></label>"
              "<label for=\"x-time\"><a>&#9679; time</a></label></p>",
              out);
    fputs("</header>\n<main>\n", out);
}

void tw_html_end(FILE *out)
{
    fprintf(out,
            "</main>\n<footer class=\"sub\">Made by trainwatch. This page fetches nothing.</footer>\n"
            "<script>\n%s</script>\n</body></html>\n",
            script);
}

void tw_html_row(FILE *out, const char *key, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs("<tr><th>", out);
    tw_html_text(out, key);
    fputs("</th><td>", out);
    tw_html_text(out, buf);
    fputs("</td></tr>\n", out);
}

/* ---- quoted log lines ---------------------------------------------- */

#define QUOTE_MAX 400 /* bytes of a log line quoted */

static void read_file_quotes(tw_html_quote *q, int n, int first)
{
    const char *path = q[first].file;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    uint64_t want = 0;
    for (int i = first; i < n; i++) {
        if (q[i].file && strcmp(q[i].file, path) == 0 && q[i].line > want)
            want = q[i].line;
    }
    gzFile f = gzopen(path, "rb");
    if (!f)
        return;
    char buf[4096];
    uint64_t line = 1;
    bool fresh = true; /* buf starts a line */
    while (line <= want && gzgets(f, buf, sizeof buf)) {
        size_t len = strlen(buf);
        bool ends = len && buf[len - 1] == '\n';
        if (fresh) {
            for (int i = first; i < n; i++) {
                if (q[i].line == line && !q[i].text && q[i].file && strcmp(q[i].file, path) == 0) {
                    size_t keep = len > QUOTE_MAX ? QUOTE_MAX : len;
                    while (keep < len && keep > 0 && ((unsigned char)buf[keep] & 0xC0) == 0x80)
                        keep--; /* not inside a UTF-8 character */
                    while (keep && (buf[keep - 1] == '\n' || buf[keep - 1] == '\r'))
                        keep--;
                    q[i].text = malloc(keep + 1);
                    if (q[i].text) {
                        memcpy(q[i].text, buf, keep);
                        q[i].text[keep] = '\0';
                    }
                }
            }
        }
        fresh = ends;
        if (ends)
            line++;
    }
    gzclose(f);
}

void tw_html_quotes_read(tw_html_quote *q, int n)
{
    for (int i = 0; i < n; i++) {
        if (!q[i].file || q[i].line == 0 || strcmp(q[i].file, "-") == 0)
            continue;
        bool done = false;
        for (int k = 0; k < i && !done; k++)
            done = q[k].file && strcmp(q[k].file, q[i].file) == 0;
        if (!done)
            read_file_quotes(q, n, i);
    }
}

void tw_html_quotes_free(tw_html_quote *q, int n)
{
    for (int i = 0; i < n; i++) {
        free(q[i].text);
        q[i].text = NULL;
    }
}

/* ---- findings ------------------------------------------------------ */

static void finding(FILE *out, const tw_finding *f, int i, const char *target, const tw_html_quote *quote)
{
    fprintf(out, "<li class=\"finding %s\" id=\"finding-%d\"><span class=\"sev\">%s</span>",
            tw_severity_name(f->severity), i + 1, tw_severity_name(f->severity));
    if (target) {
        fprintf(out, "<a class=\"goto\" href=\"#%s\">", target);
        tw_html_text(out, f->title);
        fputs("</a>", out);
    } else {
        fputs("<strong>", out);
        tw_html_text(out, f->title);
        fputs("</strong>", out);
    }
    if (f->evidence[0]) {
        fputs("<ul class=\"evidence\">", out);
        const char *s = f->evidence;
        while (*s) {
            const char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s);
            char line[TW_TEXT_MAX];
            snprintf(line, sizeof line, "%.*s", (int)len, s);
            if (len) {
                fputs("<li>", out);
                tw_html_text(out, line);
                fputs("</li>", out);
            }
            s += len + (nl ? 1 : 0);
        }
        fputs("</ul>", out);
    }
    if (f->where.file && f->where.line > 0) {
        fputs("<div class=\"where\">", out);
        tw_html_text(out, f->where.file);
        fprintf(out, ":%llu", (unsigned long long)f->where.line);
        if (f->step >= 0)
            fprintf(out, ", step %lld", (long long)f->step);
        if (f->rank >= 0)
            fprintf(out, ", rank %d", f->rank);
        fputs("</div>", out);
    }
    if (quote && quote->text) {
        fputs("<blockquote class=\"logline\">", out);
        tw_html_text(out, quote->text);
        fputs("</blockquote>", out);
    }
    if (f->recommendation[0]) {
        fputs("<p class=\"rec\">", out);
        tw_html_text(out, f->recommendation);
        fputs("</p>", out);
    }
    fputs("</li>\n", out);
}

void tw_html_findings(FILE *out, const tw_finding *f, int n, char (*targets)[32], const tw_html_quote *quotes)
{
    fputs("<section id=\"findings\"><h2>Findings</h2>\n", out);
    if (n == 0) {
        fputs("<p>No findings: nothing in the log looks wrong.</p></section>\n", out);
        return;
    }
    fputs("<ol class=\"findings\">\n", out);
    for (int i = 0; i < n; i++)
        finding(out, &f[i], i, targets && targets[i][0] ? targets[i] : NULL, quotes ? &quotes[i] : NULL);
    fputs("</ol></section>\n", out);
}
