"""Ctrl-C (SIGINT) in a long Translator.translate() raises KeyboardInterrupt
in Python after the batch in progress (not a crash, not a hang, not a result
after the whole job); the process lives on and translates again. Run in a
child process, which tells the test it is about to call translate() on
more sentences than it could translate in many minutes, one batch each;
the test then sends it SIGINT."""
import os
import signal
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import sys, time
    import attn
    tr = attn.Translator(sys.argv[1], threads=2)
    sources = ["He said that he would come back to the house tomorrow."] * 200000
    try:
        print("calling", flush=True)
        tr.translate(sources, max_batch_size=1)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    # The module still works after an interrupted call.
    print("again:", tr.translate(["I'm home."], beam_size=1)[0] is not None, flush=True)
""")


def test_ctrl_c_in_translate_raises_keyboard_interrupt(models, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), models["spm"]],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=os.environ.copy())
    try:
        assert child.stdout.readline().strip() == "calling"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert out.splitlines() == ["KeyboardInterrupt", "again: True"], (out, err)
