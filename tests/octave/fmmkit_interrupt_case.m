function fmmkit_interrupt_case()
  % A direct sum of 3e5 points on one thread (9e10 pairs: a minute or more on any core),
  % interrupted by interrupt.py's SIGINT; then the plan must still work.
  n = 300000;
  S = rand(n, 3); q = ones(n, 1);
  p = fmmkit.Plan('laplace', 'method', 'direct', 'threads', 1);
  p.set_points(S);
  disp('started'); fflush(stdout);
  tic;
  try
    p.eval(q);
    disp('not interrupted');
  catch e
    printf('caught %s after %.1f s: %s\n', e.identifier, toc, e.message);
  end
  p.set_points(S(1:100, :));
  pot = p.eval(q(1:100));
  if numel(pot) == 100 && all(isfinite(pot))
    disp('plan usable');
  end
end
