# Counts over an evaluation stage's traces.jsonl: actions executed (observation not "Could not …"),
# degenerate "get get …" actions, System 2's done flags, planner calls and tokens per episode.
# Usage: python3 stats.py <eval stage dir>/ [...]
import json,sys,glob
for d in sys.argv[1:]:
    d=glob.glob(d)[0]
    tr=[json.loads(l) for l in open(d+'/traces.jsonl')]
    acts=ok=gets=deg=0; s1=s2=0; flags=0; nf=0; score=0; succ=0; tok=0
    for t in tr:
        ep=t['episode']; succ+=ep['success']
        s1+=t['sys1_calls']; s2+=t['sys2_calls']; tok+=t['prompt_tokens']+t['generated_tokens']
        for a,o in zip(ep['actions'],ep['observations'][1:]):
            acts+=1; ok+= not o.startswith('Could not'); gets+=a.startswith('get')
            deg+= a.startswith('get get') or a.startswith('getget')
        flags+=sum(t['flags']); nf+=len(t['flags'])
    n=len(tr)
    print(d.split('/')[-2] if d.endswith('/') else d, f"episodes {n} success {succ} | actions {acts}, executed {ok} ({100*ok/acts:.0f}%), gets {gets}, degenerate 'get get…' {deg} | flag True {flags}/{nf} ({100*flags/nf:.0f}%) | planner calls/ep {s1/n:.1f}, tokens/ep {tok/n:.0f}")
