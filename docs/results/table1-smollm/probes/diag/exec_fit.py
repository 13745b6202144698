# Greedy System-2 outputs on training transitions: exact match of "<action>; <flag>".
# The prompts are written here as hier_data::batch::executor_prompt writes them (check that file
# if it changed). Usage: XTASK=target/release/xtask python3 exec_fit.py <adapter dir> <n> <sys2.jsonl>
import os,json,random,subprocess,sys
adapter=sys.argv[1]; n=int(sys.argv[2]); data=sys.argv[3]
rs=[json.loads(l) for l in open(data)][1:]
random.seed(0); pick=random.sample(rs,n)
M='data/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'
ok_a=ok_f=0
for r in pick:
    p=("You are the executor. Give one action for the subgoal and whether it completes it "
       "(`<action>; True|False`).\nSubtask: %s\nObs: %s\nAction: ")%(r['subgoal'],r['observation'])
    out=subprocess.run([os.environ.get('XTASK','target/release/xtask'),'generate','--model',M,'--adapter',adapter,'--prompt',p,'--max-new-tokens','24'],capture_output=True,text=True).stdout
    gen=out.split('\n')[0] if out else ''
    act,_,flag=gen.partition(';')
    want=r['action']; wf=str(r['subgoal_done'])
    a=act.strip()==want; f=flag.strip().startswith(wf)
    ok_a+=a; ok_f+=f
    print(('OK ' if a else 'BAD'),('ok' if f else 'bad'),repr(gen[:60]),'| want',repr(want),wf)
print(f'action exact {ok_a}/{n}, flag {ok_f}/{n}')
