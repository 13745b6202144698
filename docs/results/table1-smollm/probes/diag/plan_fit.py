# Greedy System-1 outputs on training records: exact match of the subgoal.
# The prompt as hier_data::batch::planner_prompt + schema::planner_context write it.
# Usage: XTASK=target/release/xtask python3 plan_fit.py <adapter dir> <n> <sys1.jsonl>
import os,json,random,subprocess,sys
adapter=sys.argv[1]; n=int(sys.argv[2]); data=sys.argv[3]
rs=[json.loads(l) for l in open(data)][1:]
random.seed(1); pick=random.sample(rs,n)
M='data/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'
ok=0
for r in pick:
    ga=r['group_action']; obs=r['observation']
    ctx="Group action: [%s]. Current observation: %s"%(", ".join(ga),obs)
    p="You are the planner. Given the task and the state, name the next subgoal.\nTask: %s\n%s\nSubgoal: "%(r['task'],ctx)
    out=subprocess.run([os.environ.get('XTASK','target/release/xtask'),'generate','--model',M,'--adapter',adapter,'--prompt',p,'--max-new-tokens','32'],capture_output=True,text=True).stdout
    gen=out.split('\n')[0] if out else ''
    a=gen.strip()==r['subgoal']; ok+=a
    print('OK ' if a else 'BAD', repr(gen[:70]),'| want',repr(r['subgoal']))
print(f'subgoal exact {ok}/{n}')
